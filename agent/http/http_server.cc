#include "agent/http/http_server.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/version.hpp>
#include <cctype>
#include <cerrno>
#include <deque>
#include <functional>
#include <optional>
#include <thread>
#include <type_traits>
#include <vector>

#include "agent/http/unix_socket_file.h"
#include "agent/kserve/kserve_codec.h"
#include "common/logging.h"
#include "common/mutex.h"

namespace packrat {
namespace {

namespace beast = boost::beast;
namespace bhttp = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
// A connection's executor: its strand, by its own type. Under the type-erased any_io_executor
// every asynchronous operation copied the strand into a heap-allocated executor object, about
// two dozen allocations per request (heaptrack; docs/benchmarks.md).
using Strand = net::strand<net::io_context::executor_type>;
template <class Protocol>
using StrandSocket = net::basic_stream_socket<Protocol, Strand>;
using local = net::local::stream_protocol;

}  // namespace

class HttpServer::Impl : public std::enable_shared_from_this<HttpServer::Impl> {
 public:
  explicit Impl(const HttpServerOptions& options, HttpHandler* handler)
      : options_(options), handler_(handler), acceptor_(ioc_) {}

  Status Listen() {
    beast::error_code ec;
    const auto address = net::ip::make_address(options_.endpoint.host, ec);
    if (ec) return InvalidArgument("bad listen address '" + options_.endpoint.host + "'");
    const tcp::endpoint ep(address, options_.endpoint.port);
    acceptor_.open(ep.protocol(), ec);
    if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(ep, ec);
    if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
    if (ec) {
      return Unavailable("cannot listen on " + options_.endpoint.host + ":" +
                         std::to_string(options_.endpoint.port) + ": " + ec.message());
    }
    port_ = acceptor_.local_endpoint().port();
    if (!options_.unix_socket.empty()) RETURN_IF_ERROR(ListenUnix());
    return Status::Ok();
  }

  void Start() {
    Accept<tcp>(acceptor_);
    if (unix_acceptor_) Accept<local>(*unix_acceptor_);
    // Requests being computed have no pending I/O; the guard keeps run() from returning.
    for (int i = 0; i < std::max(1, options_.threads); ++i) {
      threads_.emplace_back([this] { ioc_.run(); });
    }
  }

  void StopAccepting() {
    net::post(ioc_, [this] {
      beast::error_code ec;
      acceptor_.close(ec);
      if (unix_acceptor_) unix_acceptor_->close(ec);
    });
  }

  void Stop(std::chrono::steady_clock::time_point deadline) {
    if (stopped_.exchange(true)) return;
    StopAccepting();
    {
      MutexLock lock(&mu_);
      while (active_ > 0 && idle_cv_.WaitUntil(&mu_, deadline)) {
      }
    }
    work_.reset();
    ioc_.stop();
    for (auto& t : threads_) t.join();
    threads_.clear();
    RemoveUnixSocket();
  }

  ~Impl() { RemoveUnixSocket(); }  // also when Create() failed after binding

  uint16_t port() const { return port_; }
  bool stopped() const { return stopped_.load(); }
  const HttpServerOptions& options() const { return options_; }
  HttpHandler* handler() const { return handler_; }

  // Open connections (sessions alive); a session counts itself for its whole life.
  std::atomic<int64_t>& connections() { return connections_; }

  void BeginRequest() {
    MutexLock lock(&mu_);
    ++active_;
  }
  void EndRequest() {
    MutexLock lock(&mu_);
    if (--active_ == 0) idle_cv_.NotifyAll();
  }

 private:
  template <class Protocol>
  void Accept(typename Protocol::acceptor& acceptor);

  Status ListenUnix() {
    const std::string& path = options_.unix_socket;
    RETURN_IF_ERROR(UnixSocketFile::Prepare(path, options_.name));
    beast::error_code ec;
    unix_acceptor_.emplace(ioc_);
    const local::endpoint ep(path);
    unix_acceptor_->open(ep.protocol(), ec);
    if (!ec) unix_acceptor_->bind(ep, ec);
    if (!ec) unix_acceptor_->listen(net::socket_base::max_listen_connections, ec);
    if (ec) {
      unix_acceptor_.reset();
      return Unavailable("cannot listen on unix:" + path + ": " + ec.message());
    }
    return unix_socket_file_.Claim(path);
  }

  void RemoveUnixSocket() { unix_socket_file_.Remove(); }

  const HttpServerOptions options_;
  HttpHandler* const handler_;
  net::io_context ioc_;
  net::executor_work_guard<net::io_context::executor_type> work_{ioc_.get_executor()};
  tcp::acceptor acceptor_;
  std::optional<local::acceptor> unix_acceptor_;  // if options_.unix_socket is set
  UnixSocketFile unix_socket_file_;               // the file we bound, until removed
  std::vector<std::thread> threads_;
  uint16_t port_ = 0;
  std::atomic<bool> stopped_{false};
  Mutex mu_;
  CondVar idle_cv_;
  int64_t active_ GUARDED_BY(mu_) = 0;  // requests read but not yet answered
  std::atomic<int64_t> connections_{0};
};

namespace {

// One connection over `Protocol` (TCP or a Unix socket). Reads a request, hands it to the
// handler, writes the answer when the handler responds (from any thread: the write is posted to
// this connection's strand), then reads the next. Lives as long as an operation holds a
// shared_ptr to it.
template <class Protocol>
class Session : public std::enable_shared_from_this<Session<Protocol>> {
 public:
  static constexpr size_t kReadBufferBytes = 256 * 1024;
  // How long a rejected request's unread bytes are drained before the socket closes.
  static constexpr auto kLingerTime = std::chrono::seconds(2);

  Session(StrandSocket<Protocol>&& socket, std::shared_ptr<HttpServer::Impl> server)
      : server_(std::move(server)), stream_(std::move(socket)) {
    server_->connections().fetch_add(1, std::memory_order_relaxed);
    // Beast reads at most the buffer's free capacity (512 bytes when small) per read: without
    // room, a 600 KB tensor body takes ~1,200 reads (5 ms instead of 0.3 ms).
    buffer_.reserve(kReadBufferBytes);
  }
  ~Session() { server_->connections().fetch_sub(1, std::memory_order_relaxed); }

  void Run() {
    net::dispatch(stream_.get_executor(), [self = this->shared_from_this()] { self->Read(); });
  }

  // Answers 503 without reading anything and closes at once (no lingering close: a connection
  // over the limit must not hold a slot): the server is at max_connections.
  void RunRejecting() {
    net::dispatch(stream_.get_executor(), [self = this->shared_from_this()] {
      self->Reject(503,
                   "too many connections (the limit is " +
                       std::to_string(self->server_->options().max_connections) + ")",
                   /*linger=*/false);
    });
  }

 private:
  void Read() {
    parser_.emplace();
    parser_->body_limit(server_->options().max_body_bytes);
    parser_->header_limit(static_cast<uint32_t>(server_->options().max_header_bytes));
    // Headers within the idle timeout (which also bounds keep-alive silence), then the body
    // within the read timeout: a slow client holds a connection for a bounded time only.
    stream_.expires_after(server_->options().idle_timeout);
    bhttp::async_read_header(
        stream_, buffer_, *parser_,
        beast::bind_front_handler(&Session::OnHeader, this->shared_from_this()));
  }

  void OnHeader(beast::error_code ec, size_t) {
    if (ec) return OnRead(ec, 0);
    stream_.expires_after(server_->options().read_timeout);
    // A client that asks first (curl and libcurl do for large bodies) sends the body only
    // after "100 Continue", or after waiting a second for it. A body over the limit was
    // refused with the headers (413), so a client is told to continue only when it may.
    const auto& header = parser_->get();
    if (header.version() == 11 && !parser_->is_done() &&
        beast::iequals(header[bhttp::field::expect], "100-continue")) {
      static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      net::async_write(stream_, net::buffer(kContinue.data(), kContinue.size()),
                       [self = this->shared_from_this()](beast::error_code ec, size_t) {
                         if (ec) return self->Close();
                         self->ReadBody();
                       });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    bhttp::async_read(stream_, buffer_, *parser_,
                      beast::bind_front_handler(&Session::OnRead, this->shared_from_this()));
  }

  void OnRead(beast::error_code ec, size_t) {
    if (ec == bhttp::error::end_of_stream || ec == net::error::eof) return Close();
    if (ec == bhttp::error::body_limit) {
      return Reject(413, "request body exceeds the limit of " +
                             std::to_string(server_->options().max_body_bytes) + " bytes");
    }
    if (ec == bhttp::error::header_limit) return Reject(431, "request headers are too large");
    if (ec && ec.category() == bhttp::make_error_code(bhttp::error::bad_target).category()) {
      return Reject(400, "malformed HTTP request: " + ec.message());
    }
    if (ec) return Close();  // timeout, reset, ...

    bhttp::request<bhttp::string_body> req = parser_->release();
    HttpRequest request;
    request.method = std::string(req.method_string());
    request.target = std::string(req.target());
    for (const auto& field : req) {
      std::string name(field.name_string());
      std::transform(name.begin(), name.end(), name.begin(),
                     [](unsigned char c) { return std::tolower(c); });
      request.headers.emplace_back(std::move(name), std::string(field.value()));
    }
    request.body = std::make_shared<const std::string>(std::move(req.body()));
    const std::optional<std::string_view> client_id = request.Header("x-request-id");
    request.request_id =
        client_id && UsableRequestId(*client_id) ? std::string(*client_id) : NewRequestId();
    auto access = std::make_shared<AccessLogEntry>();
    if (server_->options().access_log != nullptr) {
      access->listener = server_->options().name;
      access->request_id = request.request_id;
      if (auto tp = request.Header("traceparent")) access->trace_id = TraceIdOf(*tp);
      access->method = request.method;
      access->path = request.target.substr(0, request.target.find('?'));
      access->bytes_in = request.body->size();
    }
    const auto received = std::chrono::steady_clock::now();
    const bool keep_alive = req.keep_alive();
    const unsigned version = req.version();
    head_ = req.method() == bhttp::verb::head;
    ++request_number_;
    request.on_disconnect = [weak = this->weak_from_this(),
                             number = request_number_](std::function<void()> on_gone) {
      if (auto self = weak.lock(); self && !self->server_->stopped()) {
        net::post(self->stream_.get_executor(), [self, number, on_gone = std::move(on_gone)] {
          self->WatchDisconnect(number, std::move(on_gone));
        });
      }
    };

    server_->BeginRequest();
    auto self = this->shared_from_this();
    std::string request_id = request.request_id;
    server_->handler()->Handle(
        std::move(request), [self, keep_alive, version, received, access,
                             request_id = std::move(request_id)](HttpResponse response) {
          response.headers.emplace_back("X-Request-Id", request_id);
          // Logged before the answer is written: a client holding its answer finds its line.
          if (const AccessLog* log = self->server_->options().access_log) {
            access->time = std::chrono::system_clock::now();
            access->status = response.status;
            access->model = std::move(response.access.model);
            access->rows = response.access.rows;
            access->queue_ms = response.access.queue_ms;
            access->compute_ms = response.access.compute_ms;
            access->duration_ms = std::chrono::duration<double, std::milli>(
                                      std::chrono::steady_clock::now() - received)
                                      .count();
            access->bytes_out = response.stream ? 0 : response.body.size();
            log->Write(*access);
          }
          if (self->server_->stopped()) return;  // no thread runs the strand any more
          net::post(self->stream_.get_executor(),
                    [self, keep_alive, version, response = std::move(response)]() mutable {
                      self->Write(std::move(response), keep_alive, version, /*counted=*/true);
                    });
        });
  }

  // Answers `status` and closes; `linger` drains what the client still sends first (Close).
  void Reject(int status, const std::string& message, bool linger = true) {
    HttpResponse response;
    response.status = status;
    response.body = ErrorJson(message);
    server_->BeginRequest();
    linger_ = linger;
    head_ = false;
    Write(std::move(response), /*keep_alive=*/false, 11, /*counted=*/true);
  }

  // Runs `on_gone` if the client closes the connection before request `number` is answered
  // (for a streamed response: before the stream ended, so that a stream still waiting for its
  // first piece notices too):
  // waits until the socket is readable, then peeks — end of stream (or an error) means gone;
  // pipelined bytes of a next request mean the client is still there (and the watch ends);
  // nothing to read (the wait was for an earlier request) re-arms it for the current one.
  void WatchDisconnect(uint64_t number, std::function<void()> on_gone) {
    if (number != request_number_ || (answered_ == number && !streaming_)) return;
    on_gone_ = std::move(on_gone);
    ArmDisconnectWatch();
  }

  void ArmDisconnectWatch() {
    if (watching_) return;
    watching_ = true;
    stream_.socket().async_wait(
        Protocol::socket::wait_read, [self = this->shared_from_this()](beast::error_code ec) {
          self->watching_ = false;
          if (ec == net::error::operation_aborted || !self->on_gone_ ||
              (self->answered_ == self->request_number_ && !self->streaming_)) {
            return;  // nothing unanswered to watch
          }
          char byte;
          const ssize_t n =
              ::recv(self->stream_.socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
          if (ec || n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
            if (auto gone = std::move(self->on_gone_)) gone();
          } else if (n < 0) {
            self->ArmDisconnectWatch();
          }
        });
  }

  // A chunked response body written piece by piece; see HttpStream. The session stays alive
  // while the writer does. Write/Finish may come from any thread; the socket is used on the
  // session's strand only.
  class StreamWriter : public HttpStream, public std::enable_shared_from_this<StreamWriter> {
   public:
    StreamWriter(std::shared_ptr<Session> session, bool keep_alive)
        : session_(std::move(session)), keep_alive_(keep_alive) {}

    bool Write(std::string data) override {
      {
        MutexLock lock(&mu_);
        if (session_->server_->stopped()) closed_ = true;
        if (closed_) return false;
        if (finishing_) return true;
        queue_.push_back(std::move(data));
      }
      Post();
      return true;
    }

    void Finish() override {
      {
        MutexLock lock(&mu_);
        if (finishing_) return;
        finishing_ = true;
      }
      Post();
    }

    // The headers could not be sent: every Write() fails.
    void Fail() {
      MutexLock lock(&mu_);
      closed_ = true;
    }

   private:
    void Post() {
      if (session_->server_->stopped()) {  // no thread runs the strand any more
        MutexLock lock(&mu_);
        closed_ = true;
        return;
      }
      net::post(session_->stream_.get_executor(),
                [self = this->shared_from_this()] { self->Pump(); });
    }

    // On the strand: writes the next piece, the last chunk once finished and drained, or gives
    // up once the client is gone; the request ends (EndStream) exactly once.
    void Pump() {
      std::string next;
      bool last = false, abandoned = false;
      {
        MutexLock lock(&mu_);
        if (writing_ || done_) return;
        if (closed_) {
          abandoned = done_ = true;
        } else if (!queue_.empty()) {
          next = std::move(queue_.front());
          queue_.pop_front();
        } else if (finishing_) {
          last = done_ = true;
        } else {
          return;
        }
        writing_ = !abandoned;
      }
      if (abandoned) return session_->EndStream(false);
      Session& s = *session_;
      s.stream_.expires_after(s.server_->options().idle_timeout);
      auto self = this->shared_from_this();
      if (last) {
        net::async_write(s.stream_, bhttp::make_chunk_last(), [self](beast::error_code ec, size_t) {
          self->session_->EndStream(!ec && self->keep_alive_);
        });
        return;
      }
      auto data = std::make_shared<std::string>(std::move(next));
      net::async_write(s.stream_, bhttp::make_chunk(net::buffer(*data)),
                       [self, data](beast::error_code ec, size_t) {
                         {
                           MutexLock lock(&self->mu_);
                           self->writing_ = false;
                           if (ec) self->closed_ = true;
                         }
                         self->Pump();
                       });
    }

    std::shared_ptr<Session> session_;
    const bool keep_alive_;
    Mutex mu_;
    std::deque<std::string> queue_ GUARDED_BY(mu_);
    bool writing_ GUARDED_BY(mu_) = false;
    bool finishing_ GUARDED_BY(mu_) = false;
    bool closed_ GUARDED_BY(mu_) = false;  // the client is gone
    bool done_ GUARDED_BY(mu_) = false;    // the request has ended
  };

  // The streamed response ended: the request is answered; keep-alive goes on reading.
  void EndStream(bool keep_alive) {
    streaming_ = false;
    on_gone_ = nullptr;
    server_->EndRequest();
    if (!keep_alive) return Close();
    Read();
  }

  // A connection kept open says how long it stays so when idle (`Keep-Alive: timeout=N`, the
  // header of RFC 2068 §19.7.1 that browsers and Node's http agent read): a client that pools
  // connections can drop one before the agent closes it, instead of sending a POST into a
  // connection that is closing.
  template <class Body>
  void SetKeepAlive(bhttp::response<Body>& res, bool keep_alive) const {
    res.keep_alive(keep_alive);
    if (!keep_alive) return;
    const auto idle =
        std::chrono::duration_cast<std::chrono::seconds>(server_->options().idle_timeout);
    res.set("Keep-Alive", "timeout=" + std::to_string(std::max<int64_t>(1, idle.count())));
  }

  void WriteStream(HttpResponse response, bool keep_alive, unsigned version) {
    answered_ = request_number_;
    streaming_ = true;  // the disconnect watch goes on until EndStream
    auto res = std::make_shared<bhttp::response<bhttp::empty_body>>(
        static_cast<bhttp::status>(response.status), version);
    res->set(bhttp::field::server, "packrat");
    res->set(bhttp::field::content_type, response.content_type);
    for (auto& [k, v] : response.headers) res->set(k, v);
    SetKeepAlive(*res, keep_alive);
    res->chunked(true);
    auto serializer = std::make_shared<bhttp::response_serializer<bhttp::empty_body>>(*res);
    auto writer = std::make_shared<StreamWriter>(this->shared_from_this(), keep_alive);
    stream_.expires_after(server_->options().idle_timeout);
    bhttp::async_write_header(stream_, *serializer,
                              [res, serializer, writer, start = std::move(response.stream)](
                                  beast::error_code ec, size_t) {
                                if (ec) writer->Fail();
                                start(writer);  // a failed writer answers every Write() with false
                                if (ec) writer->Finish();
                              });
  }

  void Write(HttpResponse response, bool keep_alive, unsigned version, bool counted) {
    if (response.stream) return WriteStream(std::move(response), keep_alive, version);
    answered_ = request_number_;
    on_gone_ = nullptr;
    auto res = std::make_shared<bhttp::response<bhttp::string_body>>(
        static_cast<bhttp::status>(response.status), version);
    res->set(bhttp::field::server, "packrat");
    res->set(bhttp::field::content_type, response.content_type);
    for (auto& [k, v] : response.headers) res->set(k, v);
    res->body() = std::move(response.body);
    SetKeepAlive(*res, keep_alive);
    res->prepare_payload();
    if (head_) {
      // The headers a GET would get, and no body (RFC 9110 §9.3.2): the bytes of one would
      // be read as the start of the next response on this connection.
      const size_t length = res->body().size();
      res->body().clear();
      res->content_length(length);
    }
    stream_.expires_after(server_->options().idle_timeout);
    bhttp::async_write(
        stream_, *res,
        [self = this->shared_from_this(), res, counted](beast::error_code ec, size_t) {
          if (counted) self->server_->EndRequest();
          if (ec || !res->keep_alive()) return self->Close();
          self->Read();
        });
  }

  // Shuts down sending. After a rejected request (`linger_`) the bytes the client still sends
  // are read and dropped until it closes or kLingerTime passes: closing a socket with unread
  // data resets the connection, and a client still writing its body would lose the error
  // response (a lingering close, as web servers do). The session lives until then.
  void Close() {
    beast::error_code ec;
    stream_.socket().shutdown(net::socket_base::shutdown_send, ec);
    if (linger_ && !ec) {
      stream_.expires_after(kLingerTime);
      Discard();
    }
  }

  void Discard() {
    stream_.async_read_some(buffer_.prepare(kReadBufferBytes),
                            [self = this->shared_from_this()](beast::error_code ec, size_t) {
                              if (!ec) self->Discard();  // uncommitted: dropped
                            });
  }

  // First, so that it goes last: the socket below must not outlive the server's io_context.
  const std::shared_ptr<HttpServer::Impl> server_;
  beast::basic_stream<Protocol, Strand> stream_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  bool head_ = false;  // the request being answered is a HEAD: its answer has no body (strand)
  // Disconnect watching (strand only): requests read so far, the last one answered, the
  // callback for the current one and whether a readability wait is pending.
  uint64_t request_number_ = 0;
  uint64_t answered_ = 0;
  std::function<void()> on_gone_;
  bool watching_ = false;
  bool streaming_ = false;  // a streamed response's body is being written
  bool linger_ = false;     // the connection closes after a rejection (Close)
};

}  // namespace

template <class Protocol>
void HttpServer::Impl::Accept(typename Protocol::acceptor& acceptor) {
  acceptor.async_accept(net::make_strand(ioc_), [this, &acceptor](beast::error_code ec,
                                                                  StrandSocket<Protocol> socket) {
    if (ec) {
      if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
      PACKRAT_LOG(WARNING) << options_.name << ": accept failed: " << ec.message();
    } else {
      if constexpr (std::is_same_v<Protocol, tcp>) {
        beast::error_code ignored;
        socket.set_option(tcp::no_delay(true), ignored);
      }
      auto session = std::make_shared<Session<Protocol>>(std::move(socket), shared_from_this());
      if (connections_.load(std::memory_order_relaxed) > options_.max_connections) {
        session->RunRejecting();
      } else {
        session->Run();
      }
    }
    if (acceptor.is_open()) Accept<Protocol>(acceptor);
  });
}

HttpServer::HttpServer(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() { Stop(std::chrono::steady_clock::now()); }

StatusOr<std::unique_ptr<HttpServer>> HttpServer::Create(const HttpServerOptions& options,
                                                         HttpHandler* handler) {
  auto impl = std::make_shared<Impl>(options, handler);
  RETURN_IF_ERROR(impl->Listen());
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

uint16_t HttpServer::port() const { return impl_->port(); }
void HttpServer::Start() { impl_->Start(); }
void HttpServer::StopAccepting() { impl_->StopAccepting(); }
void HttpServer::Stop(std::chrono::steady_clock::time_point deadline) { impl_->Stop(deadline); }

}  // namespace packrat
