// Status and StatusOr<T>: the one error model of Packrat.
//
// A Status is either OK or carries a code and a message. Functions that can fail return Status
// (or StatusOr<T> when they produce a value); exceptions from third-party libraries (libtorch,
// yaml-cpp, Boost) are caught at the call boundary and converted here. Codes map one-to-one onto
// the HTTP status the front end answers with (see HttpStatusFor in agent/http).
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace packrat {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // bad input from a client or a config file -> 400
  kNotFound,            // unknown model, file, segment -> 404
  kAlreadyExists,       // -> 409
  kResourceExhausted,   // queue full: retry later -> 429
  kOutOfRange,          // larger than the server can ever take (a row beyond the runtimes'
                        // slabs): retrying cannot help -> 413
  kFailedPrecondition,  // model not ready -> 503
  kUnavailable,         // a peer died or is shutting down -> 503
  kDeadlineExceeded,    // a wait timed out -> 504
  kInternal,            // a bug or an unexpected library failure -> 500
  kCancelled,
  kUnauthenticated,  // a control call without the right credential -> 401
  kAborted,          // conflicts with a resource in use (a shared-memory region that requests
                     // still read or write): retry once they are done -> 409
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "INVALID_ARGUMENT: message" or "OK".
  std::string ToString() const;

  // Returns a copy with `context + ": "` prepended to the message; OK stays OK.
  Status WithContext(std::string_view context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status AlreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
inline Status ResourceExhausted(std::string m) {
  return {StatusCode::kResourceExhausted, std::move(m)};
}
inline Status OutOfRange(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
inline Status FailedPrecondition(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status DeadlineExceeded(std::string m) {
  return {StatusCode::kDeadlineExceeded, std::move(m)};
}
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status Cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
inline Status Unauthenticated(std::string m) {
  return {StatusCode::kUnauthenticated, std::move(m)};
}
inline Status Aborted(std::string m) { return {StatusCode::kAborted, std::move(m)}; }

// Holds either a value or a non-OK Status. Accessing value() of an error is a bug (asserts).
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status) : status_(std::move(status)) { assert(!status_.ok()); }  // NOLINT
  StatusOr(T value) : value_(std::move(value)) {}                                  // NOLINT

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }

  T& value() & {
    assert(ok());
    return *value_;
  }
  const T& value() const& {
    assert(ok());
    return *value_;
  }
  T&& value() && {
    assert(ok());
    return std::move(*value_);
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace packrat

#define PACKRAT_CONCAT_INNER(a, b) a##b
#define PACKRAT_CONCAT(a, b) PACKRAT_CONCAT_INNER(a, b)

// Returns from the enclosing function if `expr` (a Status) is not OK.
#define RETURN_IF_ERROR(expr)                          \
  do {                                                 \
    ::packrat::Status _packrat_status = (expr);        \
    if (!_packrat_status.ok()) return _packrat_status; \
  } while (0)

// `ASSIGN_OR_RETURN(auto x, F())`: declares x from a StatusOr, or returns its error.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL(PACKRAT_CONCAT(_packrat_statusor_, __LINE__), lhs, expr)
#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                          \
  if (!tmp.ok()) return tmp.status();         \
  lhs = std::move(tmp).value()
