#include "runtime/runtime_flags.h"

#include <cstdlib>
#include <optional>

namespace packrat::runtime {

StatusOr<std::vector<int64_t>> ParseIntList(const std::string& text) {
  std::vector<int64_t> values;
  size_t pos = 0;
  while (!text.empty()) {
    const size_t comma = text.find(',', pos);
    const std::string item = text.substr(pos, comma == std::string::npos ? comma : comma - pos);
    char* end = nullptr;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0') return InvalidArgument("bad integer list '" + text + "'");
    values.push_back(v);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return values;
}

Status ParseRowSpec(const std::string& flag, const std::string& value, DataType* datatype,
                    std::vector<int64_t>* row_shape) {
  const size_t colon = value.find(':');
  const std::optional<DataType> type = DataTypeFromName(value.substr(0, colon));
  if (!type) return InvalidArgument("bad " + flag + " '" + value + "'");
  *datatype = *type;
  row_shape->clear();
  if (colon != std::string::npos && colon + 1 < value.size()) {
    ASSIGN_OR_RETURN(*row_shape, ParseIntList(value.substr(colon + 1)));
  }
  return Status::Ok();
}

StatusOr<bool> ParseCommonFlag(const std::string& flag, const std::string& value,
                               CommonFlags* flags) {
  if (flag == "--segment") {
    flags->segment = value;
  } else if (flag == "--name") {
    flags->name = value;
  } else if (flag == "--threads") {
    flags->threads = std::atoi(value.c_str());
  } else if (flag == "--agent-pid") {
    flags->agent_pid = static_cast<pid_t>(std::atoi(value.c_str()));
  } else if (flag == "--cores") {
    ASSIGN_OR_RETURN(const std::vector<int64_t> cores, ParseIntList(value));
    flags->cores.clear();
    for (int64_t c : cores) flags->cores.push_back(static_cast<int>(c));
  } else if (flag == "--warmup-batch") {
    flags->warmup_batches.push_back(std::atoll(value.c_str()));
  } else if (flag == "--warmup-iterations") {
    flags->warmup_iterations = std::atoi(value.c_str());
  } else if (flag == "--idle-spin-us") {
    flags->idle_spin_us = std::atoi(value.c_str());
  } else if (flag == "--warmup") {
    if (value != "always" && value != "while-idle") return InvalidArgument("bad --warmup " + value);
    flags->warmup_while_idle = value == "while-idle";
  } else if (flag == "--idle-start-s") {
    char* end = nullptr;
    flags->idle_start_s = std::strtod(value.c_str(), &end);
    if (value.empty() || *end != '\0' || !(flags->idle_start_s >= 0)) {
      return InvalidArgument("bad --idle-start-s " + value);
    }
  } else {
    return false;
  }
  return true;
}

}  // namespace packrat::runtime
