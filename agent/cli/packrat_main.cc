// `packrat`: the command-line tool. Dispatches `packrat <command> [args...]` to a subcommand
// from the table below; see agent/cli/command.h for how to add one.
//
// Exit codes: 0 success, 1 the command failed ("error: ..." on stderr), 2 bad command line.

#include <algorithm>
#include <iostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "agent/cli/capacity_command.h"
#include "agent/cli/command.h"
#include "agent/cli/plan_command.h"
#include "agent/cli/profile_command.h"

#ifndef PACKRAT_VERSION
#define PACKRAT_VERSION "unknown"
#endif

namespace packrat {
namespace {

int RunHelp(std::span<const std::string_view> args, std::ostream& out, std::ostream& err);
int RunVersion(std::span<const std::string_view> args, std::ostream& out, std::ostream& err);

constexpr CliCommand kCommands[] = {
    {"plan", "choose the <instances,threads,batch> configuration for a profile", RunPlanCommand},
    {"capacity", "simulate each plan's throughput at a p99 latency target on a profile",
     RunCapacityCommand},
    {"profile", "measure a model's latency profile L[t,b] with pinned runtimes", RunProfileCommand},
    {"help", "print this help, or a command's: packrat help COMMAND", RunHelp},
    {"version", "print the version", RunVersion},
};

const CliCommand* FindCommand(std::string_view name) {
  for (const CliCommand& command : kCommands) {
    if (command.name == name) return &command;
  }
  return nullptr;
}

void PrintUsage(std::ostream& out) {
  out << "usage: packrat COMMAND [flags]\n\ncommands:\n";
  size_t width = 0;
  for (const CliCommand& command : kCommands) width = std::max(width, command.name.size());
  for (const CliCommand& command : kCommands) {
    out << "  " << command.name << std::string(width - command.name.size() + 3, ' ')
        << command.summary << "\n";
  }
  out << "\nRun 'packrat COMMAND --help' for the flags of a command.\n";
}

int RunHelp(std::span<const std::string_view> args, std::ostream& out, std::ostream& err) {
  if (args.empty() || args.front() == "--help") {
    PrintUsage(out);
    return kExitOk;
  }
  const CliCommand* command = FindCommand(args.front());
  if (command == nullptr) {
    err << "error: unknown command '" << args.front() << "'\n";
    PrintUsage(err);
    return kExitUsage;
  }
  static constexpr std::string_view kHelpArgs[] = {"--help"};
  return command->run(std::span<const std::string_view>(kHelpArgs), out, err);
}

int RunVersion(std::span<const std::string_view> args, std::ostream& out, std::ostream& err) {
  if (!args.empty() && args.front() != "--help") {
    err << "error: unexpected argument '" << args.front() << "'\n";
    return kExitUsage;
  }
  out << "packrat " << PACKRAT_VERSION << "\n";
  return kExitOk;
}

}  // namespace
}  // namespace packrat

int main(int argc, char** argv) {
  using namespace packrat;
  std::vector<std::string_view> args(argv + 1, argv + argc);
  if (args.empty()) {
    PrintUsage(std::cout);
    return kExitOk;
  }
  std::string_view name = args.front();
  if (name == "--help" || name == "-h") name = "help";
  if (name == "--version") name = "version";
  const CliCommand* command = FindCommand(name);
  if (command == nullptr) {
    std::cerr << "error: unknown command '" << args.front() << "'\n";
    PrintUsage(std::cerr);
    return kExitUsage;
  }
  return command->run(std::span(args).subspan(1), std::cout, std::cerr);
}
