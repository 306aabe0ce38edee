// The subcommands of the `packrat` tool.
//
// Each subcommand is a function that gets the arguments after its name and returns the process
// exit code. It writes results to `out` and diagnostics to `err` (stdout / stderr in the tool,
// string streams in tests) and never calls exit(). To add a subcommand, implement a CliCommand
// run function in its own <name>_command.{h,cc} and add a row to the table in packrat_main.cc.
#pragma once

#include <ostream>
#include <span>
#include <string_view>

namespace packrat {

// Exit codes shared by every subcommand.
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;  // the command was well-formed but failed: "error: ..."
inline constexpr int kExitUsage = 2;  // bad command line: unknown flag, missing value, ...

using CliRunFn = int (*)(std::span<const std::string_view> args, std::ostream& out,
                         std::ostream& err);

struct CliCommand {
  std::string_view name;     // e.g. "plan"
  std::string_view summary;  // one line for `packrat help`
  CliRunFn run;              // must accept "--help" and print its own usage
};

}  // namespace packrat
