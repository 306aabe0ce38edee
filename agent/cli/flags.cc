#include "agent/cli/flags.h"

#include <algorithm>
#include <charconv>

namespace packrat {

bool ParsedFlags::Has(std::string_view name) const {
  return std::any_of(flags_.begin(), flags_.end(),
                     [name](const Occurrence& o) { return o.name == name; });
}

std::optional<std::string_view> ParsedFlags::Get(std::string_view name) const {
  for (auto it = flags_.rbegin(); it != flags_.rend(); ++it) {
    if (it->name == name) return it->value;
  }
  return std::nullopt;
}

std::vector<std::string_view> ParsedFlags::GetAll(std::string_view name) const {
  std::vector<std::string_view> values;
  for (const Occurrence& o : flags_) {
    if (o.name == name) values.push_back(o.value);
  }
  return values;
}

StatusOr<ParsedFlags> ParseFlags(std::span<const FlagSpec> specs,
                                 std::span<const std::string_view> args) {
  ParsedFlags parsed;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string_view arg = args[i];
    if (arg == "--") {
      parsed.positional_.insert(parsed.positional_.end(), args.begin() + i + 1, args.end());
      break;
    }
    if (!arg.starts_with("--")) {
      parsed.positional_.push_back(arg);
      continue;
    }
    std::string_view name = arg.substr(2);
    std::optional<std::string_view> inline_value;
    if (size_t eq = name.find('='); eq != std::string_view::npos) {
      inline_value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    auto spec = std::find_if(specs.begin(), specs.end(),
                             [name](const FlagSpec& s) { return s.name == name; });
    if (spec == specs.end()) {
      return InvalidArgument("unknown flag '--" + std::string(name) + "'");
    }
    if (spec->IsSwitch()) {
      if (inline_value.has_value()) {
        return InvalidArgument("flag '--" + std::string(name) + "' takes no value");
      }
      parsed.flags_.push_back({spec->name, {}});
      continue;
    }
    if (!inline_value.has_value()) {
      if (i + 1 >= args.size() || args[i + 1].starts_with("--")) {
        return InvalidArgument("flag '--" + std::string(name) + "' needs a value (" +
                               std::string(spec->value_name) + ")");
      }
      inline_value = args[++i];
    }
    parsed.flags_.push_back({spec->name, *inline_value});
  }
  return parsed;
}

Status RequireFlags(const ParsedFlags& flags, std::initializer_list<std::string_view> names) {
  for (std::string_view name : names) {
    if (!flags.Has(name)) {
      std::string message = "--";  // appended piecewise: GCC 12's -Wrestrict false positive
      message.append(name).append(" is required");
      return InvalidArgument(message);
    }
  }
  return Status::Ok();
}

StatusOr<int> ParseIntFlag(std::string_view name, std::string_view value, int min) {
  int parsed = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), parsed);
  if (ec != std::errc() || end != value.data() + value.size() || value.empty()) {
    return InvalidArgument("flag '--" + std::string(name) + "': '" + std::string(value) +
                           "' is not an integer");
  }
  if (parsed < min) {
    return InvalidArgument("flag '--" + std::string(name) + "' must be >= " + std::to_string(min) +
                           ", got " + std::to_string(parsed));
  }
  return parsed;
}

StatusOr<std::vector<int>> ParseIntListFlag(std::string_view name,
                                            const std::vector<std::string_view>& values, int min) {
  std::vector<int> parsed;
  for (std::string_view value : values) {
    while (true) {
      const size_t comma = value.find(',');
      ASSIGN_OR_RETURN(int one, ParseIntFlag(name, value.substr(0, comma), min));
      parsed.push_back(one);
      if (comma == std::string_view::npos) break;
      value.remove_prefix(comma + 1);
    }
  }
  return parsed;
}

std::string FlagsHelp(std::span<const FlagSpec> specs) {
  std::vector<std::string> lefts;
  size_t width = 0;
  for (const FlagSpec& s : specs) {
    // Appended piecewise: `"--" + std::string(...)` trips GCC 12's -Wrestrict false positive.
    std::string left = "--";
    left.append(s.name);
    if (!s.IsSwitch()) left.append(" ").append(s.value_name);
    width = std::max(width, left.size());
    lefts.push_back(std::move(left));
  }
  std::string out;
  for (size_t i = 0; i < specs.size(); ++i) {
    out += "  " + lefts[i] + std::string(width - lefts[i].size() + 3, ' ') +
           std::string(specs[i].help) + "\n";
  }
  return out;
}

}  // namespace packrat
