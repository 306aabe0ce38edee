// The command lines of all three binaries (packrat, packrat-agent, packrat-forward) go through
// CLI11 (Debian's libcli11-dev): every flag with its help and default, `--help` with an
// example, `--version`, and errors that name the flag and the value. This file holds what they
// share: parsing into an exit code, and the validators whose messages say what was wrong.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>

namespace packrat {

// Exit codes of every binary: a bad command line is 2 (as getopt tools do).
inline constexpr int kExitBadUsage = 2;

// Parses `args` (the words after the program or subcommand name) into `app`. nullopt: go on.
// Otherwise the exit code to return: 0 once --help or --version was printed to `out`; 2 once
// "error: WHAT\nrun '`command` --help' for usage\n" was written to `err`.
std::optional<int> ParseCommandLine(CLI::App& app, std::span<const std::string_view> args,
                                    std::string_view command, std::ostream& out,
                                    std::ostream& err);

// A validator: an integer of at least `min` ("must be >= 1, got 0").
CLI::Validator AtLeast(long long min);
// A validator: an integer between `min` and `max`.
CLI::Validator Between(long long min, long long max);

}  // namespace packrat
