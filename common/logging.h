// Minimal leveled logging to stderr: `PACKRAT_LOG(INFO) << "text " << value;`
//
// Thread-safe: each statement is formatted into its own buffer and written with one write(2),
// so lines from different threads and processes never interleave. The minimum level comes from
// the PACKRAT_LOG_LEVEL environment variable (DEBUG, INFO, WARNING, ERROR; default INFO).
//
// Two formats (server.log_format; the PACKRAT_LOG_FORMAT environment variable, text or json,
// which child processes inherit):
//   text  I 07:31:29.679641 agent file.cc:146] message
//   json  {"time":"2026-11-28T07:31:29.679641Z","level":"info","component":"agent",
//          "source":"file.cc:146","message":"message"}   (RFC 3339 time in UTC, one object a line)
// A line written inside a LogScope also names the model and request it is about: json
// "model" and "request_id" fields before "message"; text "model=M request_id=R " before it.
#pragma once

#include <sstream>
#include <string>
#include <string_view>

namespace packrat {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

bool LogEnabled(LogLevel level);

// Which levels are logged. The default: every level from PACKRAT_LOG_LEVEL up (INFO without
// it). Changeable at run time from any thread (the logging extension, agent/kserve/
// log_settings.h); a change takes effect for statements started after it, in this process only.
struct LogLevels {
  bool debug = false;
  bool info = true;
  bool warning = true;
  bool error = true;
};
LogLevels CurrentLogLevels();
void SetLogLevels(const LogLevels& levels);
// Sets the process-wide prefix, e.g. "agent" or "runtime[demo/0]".
void SetLogComponent(std::string_view component);

enum class LogFormat { kText, kJson };
// The format of every line from now on (default: PACKRAT_LOG_FORMAT, else text). Also sets
// PACKRAT_LOG_FORMAT, so that processes started afterwards log alike. Call before other threads
// start.
void SetLogFormat(LogFormat format);
LogFormat CurrentLogFormat();

// What the lines a thread writes are about while the scope lives: the model (and the request)
// it works for. Scopes nest: an inner one's non-empty fields replace the outer one's until it
// ends. Costs two string copies; meant for a thread's loop or one request's handling, not for
// each line.
// Thread-safety: per thread (thread-local); must end on the thread that made it.
class LogScope {
 public:
  explicit LogScope(std::string_view model, std::string_view request_id = {});
  ~LogScope();
  LogScope(const LogScope&) = delete;
  LogScope& operator=(const LogScope&) = delete;

 private:
  std::string outer_model_;
  std::string outer_request_id_;
};

class LogMessage {
 public:
  LogMessage(LogLevel level, const char* file, int line);
  ~LogMessage();  // writes the line
  std::ostream& stream() { return stream_; }

 private:
  LogLevel level_;
  bool json_;
  std::string head_;  // json: the fields before "message"
  std::ostringstream stream_;
};

}  // namespace packrat

#define PACKRAT_LOG_LEVEL_DEBUG ::packrat::LogLevel::kDebug
#define PACKRAT_LOG_LEVEL_INFO ::packrat::LogLevel::kInfo
#define PACKRAT_LOG_LEVEL_WARNING ::packrat::LogLevel::kWarning
#define PACKRAT_LOG_LEVEL_ERROR ::packrat::LogLevel::kError

namespace packrat {
// Lets PACKRAT_LOG be a single expression (safe inside an unbraced if/else).
struct LogVoidify {
  void operator&(std::ostream&) {}
};
}  // namespace packrat

#define PACKRAT_LOG(level)                          \
  !::packrat::LogEnabled(PACKRAT_LOG_LEVEL_##level) \
      ? (void)0                                     \
      : ::packrat::LogVoidify() &                   \
            ::packrat::LogMessage(PACKRAT_LOG_LEVEL_##level, __FILE__, __LINE__).stream()
