#include "agent/forward/forwarder.h"

#include <atomic>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <future>
#include <thread>
#include <unordered_map>
#include <vector>

#include "agent/kserve/kserve_codec.h"
#include "common/logging.h"
#include "common/mutex.h"

namespace packrat {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using generic = net::generic::stream_protocol;
using error_code = boost::system::error_code;

class Tunnel;

}  // namespace

std::string ForwardUpstream::ToString() const {
  if (kind == Kind::kUnix) return "unix:" + path;
  const bool v6 = tcp.host.find(':') != std::string::npos;
  return "tcp:" + (v6 ? "[" + tcp.host + "]" : tcp.host) + ":" + std::to_string(tcp.port);
}

StatusOr<ForwardUpstream> ParseUpstream(const std::string& text) {
  ForwardUpstream upstream;
  if (text.rfind("unix:", 0) == 0) {
    upstream.kind = ForwardUpstream::Kind::kUnix;
    upstream.path = text.substr(5);
    if (upstream.path.empty()) return InvalidArgument("'" + text + "': the socket path is empty");
    if (upstream.path.size() > kMaxUnixSocketPath) {
      return InvalidArgument("'" + text + "': the socket path is longer than " +
                             std::to_string(kMaxUnixSocketPath) + " bytes");
    }
    return upstream;
  }
  if (text.rfind("tcp:", 0) == 0) {
    auto endpoint = ParseEndpoint(text.substr(4));
    if (!endpoint.ok()) return InvalidArgument("'" + text + "': " + endpoint.status().message());
    if (endpoint->port == 0) return InvalidArgument("'" + text + "': the port must not be 0");
    upstream.kind = ForwardUpstream::Kind::kTcp;
    upstream.tcp = *endpoint;
    return upstream;
  }
  return InvalidArgument("'" + text + "' is neither unix:PATH nor tcp:HOST:PORT");
}

class Forwarder::Impl {
 public:
  explicit Impl(const ForwarderOptions& options) : options_(options), acceptor_(ioc_) {}

  Status Listen() {
    if (options_.threads < 1 || options_.threads > 64) {
      return InvalidArgument("threads must be between 1 and 64");
    }
    if (options_.buffer_bytes == 0 || options_.max_head_bytes == 0) {
      return InvalidArgument("buffer_bytes and max_head_bytes must be positive");
    }
    RETURN_IF_ERROR(ResolveUpstream());
    error_code ec;
    const auto address = net::ip::make_address(options_.listen.host, ec);
    if (ec) return InvalidArgument("bad listen address '" + options_.listen.host + "'");
    const tcp::endpoint ep(address, options_.listen.port);
    acceptor_.open(ep.protocol(), ec);
    if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(ep, ec);
    if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
    if (ec) {
      return Unavailable("cannot listen on " + options_.listen.host + ":" +
                         std::to_string(options_.listen.port) + ": " + ec.message());
    }
    port_ = acceptor_.local_endpoint().port();
    return Status::Ok();
  }

  void Start() {
    Accept();
    for (int i = 0; i < options_.threads; ++i) threads_.emplace_back([this] { ioc_.run(); });
  }

  void StopAccepting() {
    if (threads_.empty()) {  // not started: nothing else touches the acceptor
      error_code ignored;
      acceptor_.close(ignored);
      return;
    }
    std::promise<void> closed;
    net::post(ioc_, [this, &closed] {
      error_code ignored;
      acceptor_.close(ignored);
      closed.set_value();
    });
    closed.get_future().wait();
  }

  void Shutdown(std::chrono::steady_clock::time_point deadline);

  uint16_t port() const { return port_; }
  const ForwarderOptions& options() const { return options_; }
  const generic::endpoint& upstream() const { return upstream_; }

  size_t open_connections() const {
    MutexLock lock(&mu_);
    return tunnels_.size();
  }
  void Add(const std::shared_ptr<Tunnel>& tunnel) {
    MutexLock lock(&mu_);
    tunnels_.emplace(tunnel.get(), tunnel);
  }
  void Remove(const Tunnel* tunnel) {
    MutexLock lock(&mu_);
    tunnels_.erase(tunnel);
    if (tunnels_.empty()) idle_cv_.NotifyAll();
  }

  // Logs only the transitions, so a down agent does not flood the log with one line per request.
  void ReportUpstream(bool reachable, const std::string& reason) {
    const int now = reachable ? kUp : kDown;
    const int before = upstream_state_.exchange(now);
    if (before == now) return;
    if (!reachable) {
      PACKRAT_LOG(WARNING) << "upstream " << options_.upstream.ToString()
                           << " unreachable: " << reason << "; answering 503 until it is back";
    } else if (before == kDown) {
      PACKRAT_LOG(INFO) << "upstream " << options_.upstream.ToString() << " reachable again";
    }
  }

 private:
  enum { kUnknown, kUp, kDown };

  Status ResolveUpstream() {
    const ForwardUpstream& up = options_.upstream;
    if (up.kind == ForwardUpstream::Kind::kUnix) {
      if (up.path.empty() || up.path.size() > kMaxUnixSocketPath) {
        return InvalidArgument("bad upstream socket path '" + up.path + "'");
      }
      upstream_ = generic::endpoint(net::local::stream_protocol::endpoint(up.path));
      return Status::Ok();
    }
    error_code ec;
    tcp::resolver resolver(ioc_);
    const auto results = resolver.resolve(up.tcp.host, std::to_string(up.tcp.port), ec);
    if (ec || results.empty()) {
      return Unavailable("cannot resolve upstream host '" + up.tcp.host + "': " + ec.message());
    }
    upstream_ = generic::endpoint(results.begin()->endpoint());
    return Status::Ok();
  }

  void Accept();

  const ForwarderOptions options_;
  generic::endpoint upstream_;
  // Declared before ioc_: tunnels destroyed with the io_context's handlers still Remove().
  mutable Mutex mu_;
  CondVar idle_cv_;
  std::unordered_map<const Tunnel*, std::weak_ptr<Tunnel>> tunnels_ GUARDED_BY(mu_);
  std::atomic<int> upstream_state_{kUnknown};
  net::io_context ioc_;
  net::executor_work_guard<net::io_context::executor_type> work_{ioc_.get_executor()};
  tcp::acceptor acceptor_;
  std::vector<std::thread> threads_;
  uint16_t port_ = 0;
  std::atomic<bool> stopped_{false};
};

namespace {

// An HTTP/2 client (gRPC) opens with this preface; the head read stops after its first line.
constexpr std::string_view kHttp2Preface = "PRI * HTTP/2.0\r\n\r\n";

// One HTTP/2 frame on stream 0 (RFC 9113 §4.1): 24-bit length, type, no flags, stream 0.
std::string Http2Frame(uint8_t type, std::string_view payload) {
  std::string frame;
  const size_t n = payload.size();
  frame += static_cast<char>((n >> 16) & 0xff);
  frame += static_cast<char>((n >> 8) & 0xff);
  frame += static_cast<char>(n & 0xff);
  frame += static_cast<char>(type);
  frame.append(5, '\0');  // flags, stream 0
  frame += payload;
  return frame;
}

// What an HTTP/2 client gets where an HTTP/1.1 one gets a 503: a GOAWAY with no stream
// processed, REFUSED_STREAM and `reason` as its debug data (RFC 9113 §6.8), and no SETTINGS,
// so the connection never becomes ready: a gRPC client fails its call UNAVAILABLE (fail-fast
// calls at once), instead of reading HTTP/1.1 text as a protocol error.
std::string Http2GoAway(std::string_view reason) {
  std::string payload(8, '\0');  // last stream id 0; error code below
  payload[7] = 0x7;              // REFUSED_STREAM
  payload += reason;
  return Http2Frame(0x7, payload);
}

// One client connection and its upstream connection. Every handler runs on the client socket's
// strand, which the upstream socket and the timer share. Lives as long as an operation holds a
// shared_ptr to it; its destructor closes both sockets.
//
// Invariants: `closed_` once set stays set and both sockets are closed; after a successful
// connect each direction has at most one read or one write outstanding, into its own buffer.
class Tunnel : public std::enable_shared_from_this<Tunnel> {
 public:
  Tunnel(tcp::socket&& client, Forwarder::Impl* forwarder)
      : forwarder_(forwarder),
        client_(std::move(client)),
        upstream_(client_.get_executor()),
        timer_(client_.get_executor()) {}

  ~Tunnel() {
    PACKRAT_LOG(DEBUG) << "connection closed: " << up_.bytes << " bytes up, " << down_.bytes
                       << " bytes down";
    forwarder_->Remove(this);
  }

  void Start() {
    net::dispatch(client_.get_executor(), [self = shared_from_this()] { self->Connect(); });
  }

  // Closes both sockets, ending every pending operation. Call on the strand. Idempotent.
  void Close() {
    if (closed_) return;
    closed_ = true;
    error_code ignored;
    timer_.cancel();
    client_.close(ignored);
    upstream_.close(ignored);
  }

  net::any_io_executor executor() { return client_.get_executor(); }

 private:
  // One direction of the splice.
  struct Half {
    std::vector<char> buffer;
    uint64_t bytes = 0;  // forwarded so far
    bool done = false;   // the source half-closed and the FIN was passed on
  };

  void Connect() {
    if (closed_) return;  // Shutdown() got here first
    const auto self = shared_from_this();
    timer_.expires_after(forwarder_->options().connect_timeout);
    timer_.async_wait([self](error_code ec) {
      if (ec || self->connected_ || self->closed_) return;
      self->connect_timed_out_ = true;
      error_code ignored;
      self->upstream_.close(ignored);  // the connect completes with operation_aborted
    });
    upstream_.async_connect(forwarder_->upstream(), [self](error_code ec) { self->OnConnect(ec); });
  }

  void OnConnect(error_code ec) {
    timer_.cancel();
    if (closed_) return;
    const ForwarderOptions& options = forwarder_->options();
    if (ec || connect_timed_out_) {
      const std::string reason =
          connect_timed_out_ ? "connect to " + options.upstream.ToString() + " timed out after " +
                                   std::to_string(options.connect_timeout.count()) + " ms"
                             : "connect to " + options.upstream.ToString() + ": " + ec.message();
      forwarder_->ReportUpstream(false, reason);
      return Reject(reason);
    }
    connected_ = true;
    forwarder_->ReportUpstream(true, "");
    if (options.upstream.kind == ForwardUpstream::Kind::kTcp) {
      error_code ignored;
      upstream_.set_option(tcp::no_delay(true), ignored);
    }
    up_.buffer.resize(options.buffer_bytes);
    down_.buffer.resize(options.buffer_bytes);
    Pump(client_, upstream_, up_);
    Pump(upstream_, client_, down_);
  }

  // Reads what `from` has (at most one buffer), writes all of it to `to`, and repeats; bytes
  // stream through, never more than one buffer per direction in memory.
  template <class From, class To>
  void Pump(From& from, To& to, Half& half) {
    from.async_read_some(net::buffer(half.buffer), [self = shared_from_this(), &from, &to, &half](
                                                       error_code ec, size_t n) {
      if (ec == net::error::eof) return self->EndHalf(to, half);
      if (ec) return self->Close();  // reset, or Close() from the other direction
      net::async_write(to, net::buffer(half.buffer.data(), n),
                       [self, &from, &to, &half](error_code write_ec, size_t written) {
                         if (write_ec) return self->Close();
                         half.bytes += written;
                         self->Pump(from, to, half);
                       });
    });
  }

  // `from` half-closed: pass the FIN on; the other direction keeps flowing until it ends too.
  template <class To>
  void EndHalf(To& to, Half& half) {
    error_code ignored;
    to.shutdown(net::socket_base::shutdown_send, ignored);
    half.done = true;
    if (up_.done && down_.done) Close();
  }

  // The upstream is unreachable: read the request head, answer 503 (an HTTP/2 client: GOAWAY),
  // linger, close.
  void Reject(std::string reason) {
    reason_ = std::move(reason);
    const auto self = shared_from_this();
    timer_.expires_after(forwarder_->options().head_timeout);
    timer_.async_wait([self](error_code ec) {
      if (ec || self->closed_) return;
      error_code ignored;
      self->client_.cancel(ignored);  // the head read completes with operation_aborted
    });
    net::async_read_until(client_, net::dynamic_buffer(head_, forwarder_->options().max_head_bytes),
                          "\r\n\r\n", [self](error_code ec, size_t) { self->OnHead(ec); });
  }

  void OnHead(error_code ec) {
    timer_.cancel();
    if (closed_) return;
    // A complete head, one over the limit (not_found), a half-close and a head timeout all get
    // the answer; a reset does not.
    if (ec && ec != net::error::eof && ec != net::error::not_found &&
        ec != net::error::operation_aborted) {
      return Close();
    }
    const std::string body = ErrorJson("packrat agent unreachable: " + reason_);
    if (std::string_view(head_).substr(0, kHttp2Preface.size()) == kHttp2Preface) {
      response_ = Http2GoAway("packrat agent unreachable: " + reason_);
    } else {
      response_ =
          "HTTP/1.1 503 Service Unavailable\r\n"
          "Server: packrat-forward\r\n"
          "Content-Type: application/json\r\n"
          "Content-Length: " +
          std::to_string(body.size()) +
          "\r\n"
          "Connection: close\r\n\r\n" +
          body;
    }
    net::async_write(client_, net::buffer(response_),
                     [self = shared_from_this()](error_code ec, size_t) {
                       if (ec) return self->Close();
                       error_code ignored;
                       self->client_.shutdown(net::socket_base::shutdown_send, ignored);
                       self->Linger();
                     });
  }

  // Reads and drops what the client still sends (the rest of its body) until it closes or
  // linger_timeout: closing with unread data would reset the connection, and the client could
  // lose the 503.
  void Linger() {
    if (closed_) return;
    const auto self = shared_from_this();
    timer_.expires_after(forwarder_->options().linger_timeout);
    timer_.async_wait([self](error_code ec) {
      if (!ec) self->Close();
    });
    up_.buffer.resize(forwarder_->options().buffer_bytes);
    Discard();
  }

  void Discard() {
    client_.async_read_some(net::buffer(up_.buffer),
                            [self = shared_from_this()](error_code ec, size_t) {
                              if (ec) return self->Close();
                              self->Discard();
                            });
  }

  Forwarder::Impl* const forwarder_;
  tcp::socket client_;
  generic::socket upstream_;
  net::steady_timer timer_;  // connect, head and linger timeouts
  Half up_;                  // client -> upstream
  Half down_;                // upstream -> client
  bool connected_ = false;
  bool connect_timed_out_ = false;
  bool closed_ = false;
  std::string reason_;    // why the upstream is unreachable
  std::string head_;      // the request head read before answering 503
  std::string response_;  // the 503, alive until written
};

}  // namespace

void Forwarder::Impl::Accept() {
  acceptor_.async_accept(net::make_strand(ioc_), [this](error_code ec, tcp::socket socket) {
    if (ec) {
      if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;
      PACKRAT_LOG(WARNING) << "accept failed: " << ec.message();
    } else {
      error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
      const auto remote = socket.remote_endpoint(ignored);
      PACKRAT_LOG(DEBUG) << "connection from " << remote.address().to_string() << ":"
                         << remote.port();
      auto tunnel = std::make_shared<Tunnel>(std::move(socket), this);
      Add(tunnel);
      tunnel->Start();
    }
    if (acceptor_.is_open()) Accept();
  });
}

void Forwarder::Impl::Shutdown(std::chrono::steady_clock::time_point deadline) {
  if (stopped_.exchange(true)) return;
  StopAccepting();
  std::vector<std::shared_ptr<Tunnel>> left;
  {
    MutexLock lock(&mu_);
    while (!tunnels_.empty() && idle_cv_.WaitUntil(&mu_, deadline)) {
    }
    for (const auto& [key, weak] : tunnels_) {
      if (auto tunnel = weak.lock()) left.push_back(std::move(tunnel));
    }
  }
  if (!left.empty()) {
    PACKRAT_LOG(WARNING) << "closing " << left.size() << " connection(s) still open";
  }
  for (auto& tunnel : left) net::post(tunnel->executor(), [tunnel] { tunnel->Close(); });
  left.clear();
  work_.reset();  // run() returns once the closed connections' handlers have run
  for (auto& t : threads_) t.join();
  threads_.clear();
}

Forwarder::Forwarder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Forwarder::~Forwarder() { Shutdown(std::chrono::steady_clock::now()); }

StatusOr<std::unique_ptr<Forwarder>> Forwarder::Create(const ForwarderOptions& options) {
  auto impl = std::make_unique<Impl>(options);
  RETURN_IF_ERROR(impl->Listen());
  return std::unique_ptr<Forwarder>(new Forwarder(std::move(impl)));
}

uint16_t Forwarder::port() const { return impl_->port(); }
void Forwarder::Start() { impl_->Start(); }
size_t Forwarder::open_connections() const { return impl_->open_connections(); }
void Forwarder::StopAccepting() { impl_->StopAccepting(); }
void Forwarder::Shutdown(std::chrono::steady_clock::time_point deadline) {
  impl_->Shutdown(deadline);
}

}  // namespace packrat
