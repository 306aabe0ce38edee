// Command-line flags of one `packrat` subcommand.
//
// Accepted forms: `--name value`, `--name=value`, and `--name` alone for switches. A flag may
// be given more than once; Get() returns the last value, GetAll() every value in order. `--`
// ends the flags; everything after it, and every argument not starting with "--", is
// positional. There are no short (-x) flags.
//
// Thread-safety: plain values; no shared state.
#pragma once

#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace packrat {

struct FlagSpec {
  std::string_view name;        // without the leading "--"
  std::string_view value_name;  // e.g. "FILE" in the usage text; empty for a switch
  std::string_view help;        // one line
  bool IsSwitch() const { return value_name.empty(); }
};

class ParsedFlags {
 public:
  bool Has(std::string_view name) const;
  // The value of the last occurrence of `name`; nullopt if absent (or a switch).
  std::optional<std::string_view> Get(std::string_view name) const;
  // The values of every occurrence of `name`, in command-line order.
  std::vector<std::string_view> GetAll(std::string_view name) const;
  const std::vector<std::string_view>& positional() const { return positional_; }

 private:
  friend StatusOr<ParsedFlags> ParseFlags(std::span<const FlagSpec> specs,
                                          std::span<const std::string_view> args);
  struct Occurrence {
    std::string_view name;
    std::string_view value;
  };
  std::vector<Occurrence> flags_;
  std::vector<std::string_view> positional_;
};

// Parses `args` (the arguments after the subcommand name; they must outlive the result).
// kInvalidArgument for a flag not in `specs`, a missing value, or a value given to a switch.
StatusOr<ParsedFlags> ParseFlags(std::span<const FlagSpec> specs,
                                 std::span<const std::string_view> args);

// kInvalidArgument "--NAME is required" for the first of `names` that `flags` lacks.
Status RequireFlags(const ParsedFlags& flags, std::initializer_list<std::string_view> names);

// Parses `value` of flag `name` as an integer ≥ `min`. kInvalidArgument naming the flag.
StatusOr<int> ParseIntFlag(std::string_view name, std::string_view value, int min);

// Parses every value of a repeatable flag `name` (GetAll), each an integer ≥ `min` or a
// comma-separated list of them ("--batch 1,8 --batch 64"), in order. kInvalidArgument naming
// the flag.
StatusOr<std::vector<int>> ParseIntListFlag(std::string_view name,
                                            const std::vector<std::string_view>& values, int min);

// One line per flag: "  --name VALUE   help", aligned.
std::string FlagsHelp(std::span<const FlagSpec> specs);

}  // namespace packrat
