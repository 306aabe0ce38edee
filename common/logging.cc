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

#include "common/json_string.h"

namespace packrat {
namespace {

// One bit per LogLevel.
constexpr unsigned Bit(LogLevel level) { return 1u << static_cast<unsigned>(level); }

unsigned LevelsFromEnv() {
  const char* env = std::getenv("PACKRAT_LOG_LEVEL");
  LogLevel min = LogLevel::kInfo;
  const std::string_view v(env == nullptr ? "" : env);
  if (v == "DEBUG") min = LogLevel::kDebug;
  if (v == "WARNING") min = LogLevel::kWarning;
  if (v == "ERROR") min = LogLevel::kError;
  unsigned mask = 0;
  for (LogLevel l : {LogLevel::kDebug, LogLevel::kInfo, LogLevel::kWarning, LogLevel::kError}) {
    if (l >= min) mask |= Bit(l);
  }
  return mask;
}

std::atomic<unsigned>& EnabledLevels() {
  static std::atomic<unsigned> mask(LevelsFromEnv());
  return mask;
}

std::atomic<bool>& JsonFormat() {
  static std::atomic<bool> json = [] {
    const char* env = std::getenv("PACKRAT_LOG_FORMAT");
    return env != nullptr && std::string_view(env) == "json";
  }();
  return json;
}

std::mutex& ComponentMutex() {
  static std::mutex mu;
  return mu;
}
std::string& Component() {
  static std::string component = "packrat";
  return component;
}

// A level's names: the text format's letter and the json format's word.
struct LevelNames {
  const char* letter;
  const char* word;
};
LevelNames NamesOf(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return {"D", "debug"};
    case LogLevel::kInfo:
      return {"I", "info"};
    case LogLevel::kWarning:
      return {"W", "warning"};
    case LogLevel::kError:
      return {"E", "error"};
  }
  return {"?", "unknown"};
}

}  // namespace

bool LogEnabled(LogLevel level) {
  return (EnabledLevels().load(std::memory_order_relaxed) & Bit(level)) != 0;
}

LogLevels CurrentLogLevels() {
  const unsigned mask = EnabledLevels().load(std::memory_order_relaxed);
  LogLevels levels;
  levels.debug = (mask & Bit(LogLevel::kDebug)) != 0;
  levels.info = (mask & Bit(LogLevel::kInfo)) != 0;
  levels.warning = (mask & Bit(LogLevel::kWarning)) != 0;
  levels.error = (mask & Bit(LogLevel::kError)) != 0;
  return levels;
}

void SetLogLevels(const LogLevels& levels) {
  const unsigned mask =
      (levels.debug ? Bit(LogLevel::kDebug) : 0) | (levels.info ? Bit(LogLevel::kInfo) : 0) |
      (levels.warning ? Bit(LogLevel::kWarning) : 0) | (levels.error ? Bit(LogLevel::kError) : 0);
  EnabledLevels().store(mask, std::memory_order_relaxed);
}

LogFormat CurrentLogFormat() { return JsonFormat().load() ? LogFormat::kJson : LogFormat::kText; }

void SetLogFormat(LogFormat format) {
  JsonFormat().store(format == LogFormat::kJson);
  setenv("PACKRAT_LOG_FORMAT", format == LogFormat::kJson ? "json" : "text", 1);
}

namespace {

struct ThreadLogFields {
  std::string model;
  std::string request_id;
};

ThreadLogFields& Fields() {
  thread_local ThreadLogFields fields;
  return fields;
}

}  // namespace

LogScope::LogScope(std::string_view model, std::string_view request_id) {
  ThreadLogFields& f = Fields();
  outer_model_ = f.model;
  outer_request_id_ = f.request_id;
  if (!model.empty()) f.model = model;
  if (!request_id.empty()) f.request_id = request_id;
}

LogScope::~LogScope() {
  ThreadLogFields& f = Fields();
  f.model = std::move(outer_model_);
  f.request_id = std::move(outer_request_id_);
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
  const ThreadLogFields& fields = Fields();
  if (!json_) {
    stream_ << NamesOf(level_).letter << ' ' << stamp << frac << ' ' << component << ' ' << source
            << "] ";
    if (!fields.model.empty()) stream_ << "model=" << fields.model << ' ';
    if (!fields.request_id.empty()) stream_ << "request_id=" << fields.request_id << ' ';
    return;
  }
  char date[16];
  std::strftime(date, sizeof(date), "%Y-%m-%dT", &tm);
  head_ = std::string("{\"time\":\"") + date + stamp + frac + "Z\",\"level\":\"" +
          NamesOf(level_).word + "\",\"component\":";
  AppendJsonString(head_, component);
  head_ += ",\"source\":";
  AppendJsonString(head_, source);
  if (!fields.model.empty()) {
    head_ += ",\"model\":";
    AppendJsonString(head_, fields.model);
  }
  if (!fields.request_id.empty()) {
    head_ += ",\"request_id\":";
    AppendJsonString(head_, fields.request_id);
  }
  head_ += ",\"message\":";
}

LogMessage::~LogMessage() {
  std::string s;
  if (json_) {
    s = std::move(head_);
    AppendJsonString(s, stream_.str());
    s += "}\n";
  } else {
    stream_ << '\n';
    s = stream_.str();
  }
  [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, s.data(), s.size());
}

}  // namespace packrat
