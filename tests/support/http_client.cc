#include "tests/support/http_client.h"

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <optional>

namespace packrat::testing {

namespace beast = boost::beast;
namespace bhttp = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using local = net::local::stream_protocol;

struct HttpClient::Impl {
  std::string host;
  uint16_t port;
  std::string unix_path;  // if set, connects here instead of host:port
  net::io_context ioc;
  std::optional<beast::tcp_stream> stream;
  std::optional<local::socket> unix_stream;
  beast::flat_buffer buffer;

  bool connected() const { return stream || unix_stream; }
  void Disconnect() {
    stream.reset();
    unix_stream.reset();
  }

  bool Connect(std::string* error) {
    beast::error_code ec;
    if (!unix_path.empty()) {
      unix_stream.emplace(ioc);
      unix_stream->connect(local::endpoint(unix_path), ec);
      if (ec) {
        *error = ec.message();
        unix_stream.reset();
        return false;
      }
      buffer.clear();
      buffer.reserve(256 * 1024);
      return true;
    }
    stream.emplace(ioc);
    tcp::resolver resolver(ioc);
    auto results = resolver.resolve(host, std::to_string(port), ec);
    if (!ec) stream->connect(results, ec);
    if (ec) {
      *error = ec.message();
      stream.reset();
      return false;
    }
    stream->socket().set_option(tcp::no_delay(true), ec);
    buffer.clear();
    buffer.reserve(256 * 1024);  // Beast reads at most the free capacity per call
    return true;
  }
};

HttpClient::HttpClient(std::string host, uint16_t port) : impl_(std::make_unique<Impl>()) {
  impl_->host = std::move(host);
  impl_->port = port;
}

HttpClient::HttpClient(UnixSocket socket) : impl_(std::make_unique<Impl>()) {
  impl_->host = "localhost";
  impl_->port = 0;
  impl_->unix_path = std::move(socket.path);
}

HttpClient::~HttpClient() = default;

HttpResult HttpClient::Request(const std::string& method, const std::string& target,
                               const std::string& body,
                               const std::map<std::string, std::string>& headers) {
  HttpResult result;
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (!impl_->connected() && !impl_->Connect(&result.error)) return result;
    bhttp::request<bhttp::string_body> req(bhttp::string_to_verb(method), target, 11);
    req.set(bhttp::field::host, impl_->host);
    for (const auto& [k, v] : headers) req.set(k, v);
    if (!body.empty() || method == "POST") {
      req.body() = body;
      if (headers.count("Content-Type") == 0)
        req.set(bhttp::field::content_type, "application/json");
    }
    req.keep_alive(true);
    req.prepare_payload();
    beast::error_code ec;
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(1ull << 30);
    parser.skip(method == "HEAD");  // an answer to HEAD has headers only
    auto exchange = [&](auto& stream) {
      bhttp::write(stream, req, ec);
      // A server may answer (413, say) and close before the whole body is sent: its answer is
      // read anyway, as curl does.
      beast::error_code read_ec;
      bhttp::read(stream, impl_->buffer, parser, read_ec);
      ec = read_ec;
    };
    if (impl_->unix_stream) {
      exchange(*impl_->unix_stream);
    } else {
      exchange(*impl_->stream);
    }
    if (ec) {
      // A server that closed an idle keep-alive connection: reconnect once and resend.
      result.error = ec.message();
      impl_->Disconnect();
      continue;
    }
    auto res = parser.release();
    result.status = static_cast<int>(res.result_int());
    for (const auto& field : res) {
      std::string name(field.name_string());
      std::transform(name.begin(), name.end(), name.begin(),
                     [](unsigned char c) { return std::tolower(c); });
      result.headers[name] = std::string(field.value());
    }
    result.body = std::move(res.body());
    result.error.clear();
    if (!res.keep_alive()) impl_->Disconnect();
    return result;
  }
  return result;
}

}  // namespace packrat::testing
