#include "agent/http/http_server.h"

#include <algorithm>
#include <atomic>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/version.hpp>
#include <cctype>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "agent/kserve/kserve_codec.h"
#include "common/logging.h"

namespace packrat {
namespace {

namespace beast = boost::beast;
namespace bhttp = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

}  // namespace

class HttpServer::Impl {
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
    return Status::Ok();
  }

  void Start() {
    Accept();
    // Requests being computed have no pending I/O; the guard keeps run() from returning.
    for (int i = 0; i < std::max(1, options_.threads); ++i) {
      threads_.emplace_back([this] { ioc_.run(); });
    }
  }

  void StopAccepting() {
    net::post(ioc_, [this] {
      beast::error_code ec;
      acceptor_.close(ec);
    });
  }

  void Stop(std::chrono::steady_clock::time_point deadline) {
    if (stopped_.exchange(true)) return;
    StopAccepting();
    {
      std::unique_lock<std::mutex> lock(mu_);
      idle_cv_.wait_until(lock, deadline, [&] { return active_ == 0; });
    }
    work_.reset();
    ioc_.stop();
    for (auto& t : threads_) t.join();
    threads_.clear();
  }

  uint16_t port() const { return port_; }
  const HttpServerOptions& options() const { return options_; }
  HttpHandler* handler() const { return handler_; }

  void BeginRequest() {
    std::lock_guard<std::mutex> lock(mu_);
    ++active_;
  }
  void EndRequest() {
    std::lock_guard<std::mutex> lock(mu_);
    if (--active_ == 0) idle_cv_.notify_all();
  }

 private:
  void Accept();

  const HttpServerOptions options_;
  HttpHandler* const handler_;
  net::io_context ioc_;
  net::executor_work_guard<net::io_context::executor_type> work_{ioc_.get_executor()};
  tcp::acceptor acceptor_;
  std::vector<std::thread> threads_;
  uint16_t port_ = 0;
  std::atomic<bool> stopped_{false};
  std::mutex mu_;
  std::condition_variable idle_cv_;
  int64_t active_ = 0;  // requests read but not yet answered; guarded by mu_
};

namespace {

// One connection. Reads a request, hands it to the handler, writes the answer when the handler
// responds (from any thread: the write is posted to this connection's strand), then reads the
// next. Lives as long as an operation holds a shared_ptr to it.
class Session : public std::enable_shared_from_this<Session> {
 public:
  static constexpr size_t kReadBufferBytes = 256 * 1024;

  Session(tcp::socket&& socket, HttpServer::Impl* server)
      : stream_(std::move(socket)), server_(server) {
    // Beast reads at most the buffer's free capacity (512 bytes when small) per read: without
    // room, a 600 KB tensor body takes ~1,200 reads (5 ms instead of 0.3 ms).
    buffer_.reserve(kReadBufferBytes);
  }

  void Run() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->Read(); });
  }

 private:
  void Read() {
    parser_.emplace();
    parser_->body_limit(server_->options().max_body_bytes);
    parser_->header_limit(static_cast<uint32_t>(server_->options().max_header_bytes));
    stream_.expires_after(server_->options().idle_timeout);
    bhttp::async_read(stream_, buffer_, *parser_,
                      beast::bind_front_handler(&Session::OnRead, shared_from_this()));
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
    const bool keep_alive = req.keep_alive();
    const unsigned version = req.version();

    server_->BeginRequest();
    auto self = shared_from_this();
    server_->handler()->Handle(
        std::move(request), [self, keep_alive, version](HttpResponse response) {
          net::post(self->stream_.get_executor(),
                    [self, keep_alive, version, response = std::move(response)]() mutable {
                      self->Write(std::move(response), keep_alive, version, /*counted=*/true);
                    });
        });
  }

  void Reject(int status, const std::string& message) {
    HttpResponse response;
    response.status = status;
    response.body = ErrorJson(message);
    server_->BeginRequest();
    Write(std::move(response), /*keep_alive=*/false, 11, /*counted=*/true);
  }

  void Write(HttpResponse response, bool keep_alive, unsigned version, bool counted) {
    auto res = std::make_shared<bhttp::response<bhttp::string_body>>(
        static_cast<bhttp::status>(response.status), version);
    res->set(bhttp::field::server, "packrat");
    res->set(bhttp::field::content_type, response.content_type);
    for (auto& [k, v] : response.headers) res->set(k, v);
    res->body() = std::move(response.body);
    res->keep_alive(keep_alive);
    res->prepare_payload();
    stream_.expires_after(server_->options().idle_timeout);
    bhttp::async_write(stream_, *res,
                       [self = shared_from_this(), res, counted](beast::error_code ec, size_t) {
                         if (counted) self->server_->EndRequest();
                         if (ec || !res->keep_alive()) return self->Close();
                         self->Read();
                       });
  }

  void Close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  HttpServer::Impl* server_;
};

}  // namespace

void HttpServer::Impl::Accept() {
  acceptor_.async_accept(net::make_strand(ioc_), [this](beast::error_code ec, tcp::socket socket) {
    if (ec) {
      if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;
      PACKRAT_LOG(WARNING) << options_.name << ": accept failed: " << ec.message();
    } else {
      beast::error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
      std::make_shared<Session>(std::move(socket), this)->Run();
    }
    if (acceptor_.is_open()) Accept();
  });
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() { Stop(std::chrono::steady_clock::now()); }

StatusOr<std::unique_ptr<HttpServer>> HttpServer::Create(const HttpServerOptions& options,
                                                         HttpHandler* handler) {
  auto impl = std::make_unique<Impl>(options, handler);
  RETURN_IF_ERROR(impl->Listen());
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

uint16_t HttpServer::port() const { return impl_->port(); }
void HttpServer::Start() { impl_->Start(); }
void HttpServer::StopAccepting() { impl_->StopAccepting(); }
void HttpServer::Stop(std::chrono::steady_clock::time_point deadline) { impl_->Stop(deadline); }

}  // namespace packrat
