#include "common/command_line.h"

#include <charconv>
#include <vector>

namespace packrat {
namespace {

// The value as an integer, or the reason it is not one.
std::optional<long long> ToInteger(const std::string& text, std::string* why) {
  long long value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    *why = "'" + text + "' is not an integer";
    return std::nullopt;
  }
  return value;
}

}  // namespace

CLI::Validator AtLeast(long long min) {
  return CLI::Validator(
      [min](std::string& text) -> std::string {
        std::string why;
        const std::optional<long long> v = ToInteger(text, &why);
        if (!v) return why;
        if (*v < min) return "must be >= " + std::to_string(min) + ", got " + text;
        return "";
      },
      "INT>=" + std::to_string(min));
}

CLI::Validator Between(long long min, long long max) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        std::string why;
        const std::optional<long long> v = ToInteger(text, &why);
        if (!v) return why;
        if (*v < min || *v > max) {
          return "must be between " + std::to_string(min) + " and " + std::to_string(max) +
                 ", got " + text;
        }
        return "";
      },
      "INT in [" + std::to_string(min) + "," + std::to_string(max) + "]");
}

std::optional<int> ParseCommandLine(CLI::App& app, std::span<const std::string_view> args,
                                    std::string_view command, std::ostream& out,
                                    std::ostream& err) {
  // CLI11 takes the words in reverse order.
  std::vector<std::string> words(args.rbegin(), args.rend());
  try {
    app.parse(words);
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    return 0;
  } catch (const CLI::CallForVersion& e) {
    out << e.what() << "\n";
    return 0;
  } catch (const CLI::ParseError& e) {
    err << "error: " << e.what() << "\nrun '" << command << " --help' for usage\n";
    return kExitBadUsage;
  }
  return std::nullopt;
}

}  // namespace packrat
