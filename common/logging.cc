#include "common/logging.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <string>

namespace packrat {
namespace {

LogLevel MinLevelFromEnv() {
  const char* env = std::getenv("PACKRAT_LOG_LEVEL");
  if (env == nullptr) return LogLevel::kInfo;
  std::string_view v(env);
  if (v == "DEBUG") return LogLevel::kDebug;
  if (v == "WARNING") return LogLevel::kWarning;
  if (v == "ERROR") return LogLevel::kError;
  return LogLevel::kInfo;
}

std::atomic<bool>& JsonFormat() {
  static std::atomic<bool> json = [] {
    const char* env = std::getenv("PACKRAT_LOG_FORMAT");
    return env != nullptr && std::string_view(env) == "json";
  }();
  return json;
}

// `text` as the inside of a JSON string.
void AppendJsonEscaped(std::string& out, std::string_view text) {
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20) {
      char u[8];
      std::snprintf(u, sizeof(u), "\\u%04x", c);
      out += u;
    } else {
      out += ch;
    }
  }
}

const char* JsonLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kError:
      return "error";
  }
  return "unknown";
}

std::mutex& ComponentMutex() {
  static std::mutex mu;
  return mu;
}
std::string& Component() {
  static std::string component = "packrat";
  return component;
}

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "D";
    case LogLevel::kInfo:
      return "I";
    case LogLevel::kWarning:
      return "W";
    case LogLevel::kError:
      return "E";
  }
  return "?";
}

}  // namespace

bool LogEnabled(LogLevel level) {
  static const LogLevel min_level = MinLevelFromEnv();
  return level >= min_level;
}

void SetLogFormat(LogFormat format) {
  JsonFormat().store(format == LogFormat::kJson);
  setenv("PACKRAT_LOG_FORMAT", format == LogFormat::kJson ? "json" : "text", 1);
}

void SetLogComponent(std::string_view component) {
  std::lock_guard<std::mutex> lock(ComponentMutex());
  Component() = std::string(component);
}

LogMessage::LogMessage(LogLevel level, const char* file, int line)
    : level_(level), json_(JsonFormat().load()) {
  const auto now = std::chrono::system_clock::now();
  const std::time_t secs = std::chrono::system_clock::to_time_t(now);
  const auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() %
      1000000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%H:%M:%S", &tm);
  const char* base = std::strrchr(file, '/');
  std::string component;
  {
    std::lock_guard<std::mutex> lock(ComponentMutex());
    component = Component();
  }
  char frac[16];
  std::snprintf(frac, sizeof(frac), ".%06ld", static_cast<long>(micros));
  const std::string source =
      std::string(base != nullptr ? base + 1 : file) + ':' + std::to_string(line);
  if (!json_) {
    stream_ << LevelName(level_) << ' ' << stamp << frac << ' ' << component << ' ' << source
            << "] ";
    return;
  }
  char date[16];
  std::strftime(date, sizeof(date), "%Y-%m-%dT", &tm);
  head_ = std::string("{\"time\":\"") + date + stamp + frac + "Z\",\"level\":\"" +
          JsonLevelName(level_) + "\",\"component\":\"";
  AppendJsonEscaped(head_, component);
  head_ += "\",\"source\":\"";
  AppendJsonEscaped(head_, source);
  head_ += "\",\"message\":\"";
}

LogMessage::~LogMessage() {
  std::string s;
  if (json_) {
    s = std::move(head_);
    AppendJsonEscaped(s, stream_.str());
    s += "\"}\n";
  } else {
    stream_ << '\n';
    s = stream_.str();
  }
  [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, s.data(), s.size());
}

}  // namespace packrat
