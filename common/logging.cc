#include "common/logging.h"

#include <unistd.h>

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

void SetLogComponent(std::string_view component) {
  std::lock_guard<std::mutex> lock(ComponentMutex());
  Component() = std::string(component);
}

LogMessage::LogMessage(LogLevel level, const char* file, int line) : level_(level) {
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
  stream_ << LevelName(level_) << ' ' << stamp << frac << ' ' << component << ' '
          << (base != nullptr ? base + 1 : file) << ':' << line << "] ";
}

LogMessage::~LogMessage() {
  stream_ << '\n';
  const std::string s = stream_.str();
  [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, s.data(), s.size());
}

}  // namespace packrat
