// A blocking HTTP/1.1 client for tests: one keep-alive connection to a loopback server, over TCP
// or a Unix domain socket.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

namespace packrat::testing {

struct HttpResult {
  int status = 0;                              // 0 if the request could not be sent or answered
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
  std::string error;  // transport error, if any
};

// The path of a Unix domain socket to connect to.
struct UnixSocket {
  std::string path;
};

class HttpClient {
 public:
  HttpClient(std::string host, uint16_t port);
  explicit HttpClient(UnixSocket socket);  // sends "Host: localhost"
  ~HttpClient();

  // Sends one request (reconnecting if the server closed the connection) and waits for the
  // answer. `headers` are extra request headers.
  HttpResult Request(const std::string& method, const std::string& target,
                     const std::string& body = "",
                     const std::map<std::string, std::string>& headers = {});
  HttpResult Get(const std::string& target) { return Request("GET", target); }
  HttpResult Post(const std::string& target, const std::string& body,
                  const std::map<std::string, std::string>& headers = {}) {
    return Request("POST", target, body, headers);
  }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace packrat::testing
