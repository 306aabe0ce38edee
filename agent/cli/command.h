// The subcommands of the `packrat` tool.
//
// Each subcommand is a function that gets the arguments after its name and returns the process
// exit code. It writes results to `out` and diagnostics to `err` (stdout / stderr in the tool,
// string streams in tests) and never calls exit(). To add a subcommand, implement a CliCommand
// run function in its own <name>_command.{h,cc} and add a row to the table in packrat_main.cc.
#pragma once

#include <cstdio>
#include <ostream>
#include <span>
#include <string>
#include <string_view>

#include "common/status.h"

namespace packrat {

// Exit codes shared by every subcommand.
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;  // the command was well-formed but failed: "error: ..."
inline constexpr int kExitUsage = 2;  // bad command line: unknown flag, missing value, ...

// Writes "error: MESSAGE" and where to find `command`'s usage; returns kExitUsage.
inline int UsageError(std::ostream& err, const Status& status, std::string_view command) {
  err << "error: " << status.message() << "\nrun 'packrat " << command << " --help' for usage\n";
  return kExitUsage;
}

// Writes "error: MESSAGE"; returns kExitError.
inline int CommandFailure(std::ostream& err, const Status& status) {
  err << "error: " << status.message() << "\n";
  return kExitError;
}

// `value` with `decimals` digits after the point, as printf's %.*f.
inline std::string FormatFixed(double value, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, value);
  return buf;
}

using CliRunFn = int (*)(std::span<const std::string_view> args, std::ostream& out,
                         std::ostream& err);

struct CliCommand {
  std::string_view name;     // e.g. "plan"
  std::string_view summary;  // one line for `packrat help`
  CliRunFn run;              // must accept "--help" and print its own usage
};

}  // namespace packrat
