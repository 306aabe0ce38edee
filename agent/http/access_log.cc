#include "agent/http/access_log.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <random>

namespace packrat {
namespace {

// Appends `s` as a JSON string (the values are ASCII-checked ids, paths and model names, but
// paths come from clients: escape what JSON needs).
void AppendJson(std::string& out, std::string_view s) {
  out += '"';
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7f) {
      char buf[8];
      snprintf(buf, sizeof(buf), "\\u%04x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  out += '"';
}

// logfmt: bare where the value has no space, quote or '=', else quoted like JSON.
void AppendLogfmt(std::string& out, std::string_view s) {
  const bool bare =
      !s.empty() && s.find_first_of(" \"=\\") == std::string_view::npos &&
      std::all_of(s.begin(), s.end(), [](char c) {
        return static_cast<unsigned char>(c) > 0x20 && static_cast<unsigned char>(c) != 0x7f;
      });
  if (bare) {
    out += s;
  } else {
    AppendJson(out, s);
  }
}

std::string Milliseconds(double ms) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%.3f", ms);
  return buf;
}

std::string Rfc3339(std::chrono::system_clock::time_point t) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch());
  const time_t secs = static_cast<time_t>(ms.count() / 1000);
  tm utc{};
  gmtime_r(&secs, &utc);
  char buf[40];
  const size_t n = strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &utc);
  snprintf(buf + n, sizeof(buf) - n, ".%03dZ", static_cast<int>(ms.count() % 1000));
  return buf;
}

}  // namespace

StatusOr<std::unique_ptr<AccessLog>> AccessLog::Open(enum Format format, const std::string& path) {
  if (path.empty() || path == "-") {
    return std::unique_ptr<AccessLog>(new AccessLog(format, STDOUT_FILENO, false));
  }
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return NotFound("cannot open access log '" + path + "': " + strerror(errno));
  return std::unique_ptr<AccessLog>(new AccessLog(format, fd, true));
}

AccessLog::~AccessLog() {
  if (owned_) close(fd_);
}

std::string AccessLog::Format(const AccessLogEntry& e) const {
  std::string out;
  out.reserve(256);
  bool first = true;
  auto field = [&](std::string_view key, std::string_view value, bool quoted) {
    if (format_ == Format::kJson) {
      out += first ? "{" : ",";
      AppendJson(out, key);
      out += ':';
      if (quoted) {
        AppendJson(out, value);
      } else {
        out += value;
      }
    } else {
      if (!first) out += ' ';
      out += key;
      out += '=';
      AppendLogfmt(out, value);
    }
    first = false;
  };
  field("time", Rfc3339(e.time), true);
  field("listener", e.listener, true);
  field("request_id", e.request_id, true);
  if (!e.trace_id.empty()) field("trace_id", e.trace_id, true);
  field("method", e.method, true);
  field("path", e.path, true);
  field("status", std::to_string(e.status), false);
  if (!e.grpc_status.empty()) field("grpc_status", e.grpc_status, true);
  if (!e.model.empty()) field("model", e.model, true);
  if (e.rows >= 0) field("rows", std::to_string(e.rows), false);
  field("duration_ms", Milliseconds(e.duration_ms), false);
  if (e.queue_ms >= 0) field("queue_ms", Milliseconds(e.queue_ms), false);
  if (e.compute_ms >= 0) field("compute_ms", Milliseconds(e.compute_ms), false);
  field("bytes_in", std::to_string(e.bytes_in), false);
  field("bytes_out", std::to_string(e.bytes_out), false);
  if (format_ == Format::kJson) out += '}';
  out += '\n';
  return out;
}

void AccessLog::Write(const AccessLogEntry& entry) const {
  const std::string line = Format(entry);
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = write(fd_, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // a full disk or a closed stdout: the access log is best effort
    done += static_cast<size_t>(n);
  }
}

std::string NewRequestId() {
  thread_local std::mt19937_64 random(std::random_device{}());
  char buf[33];
  snprintf(buf, sizeof(buf), "%016llx%016llx", static_cast<unsigned long long>(random()),
           static_cast<unsigned long long>(random()));
  return buf;
}

bool UsableRequestId(std::string_view id) {
  if (id.empty() || id.size() > 128) return false;
  for (char c : id) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x21 || u > 0x7e || c == '"' || c == '\\') return false;
  }
  return true;
}

std::string TraceIdOf(std::string_view tp) {
  // version "-" trace-id(32) "-" parent-id(16) "-" flags(2)
  if (tp.size() < 55 || tp[2] != '-' || tp[35] != '-' || tp[52] != '-') return "";
  const std::string_view trace = tp.substr(3, 32);
  auto hex = [](std::string_view s) {
    return std::all_of(s.begin(), s.end(),
                       [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
  };
  if (!hex(tp.substr(0, 2)) || !hex(trace) || trace == std::string(32, '0')) return "";
  return std::string(trace);
}

}  // namespace packrat
