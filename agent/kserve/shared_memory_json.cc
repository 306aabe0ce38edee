#include "agent/kserve/shared_memory_json.h"

#include <simdjson.h>

#include "common/json_string.h"

namespace packrat {

StatusOr<SharedMemoryRegisterBody> ParseSharedMemoryRegisterBody(std::string_view body) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (const auto error = parser.parse(body.data(), body.size()).get(root);
      error != simdjson::SUCCESS) {
    return InvalidArgument("malformed JSON: " + std::string(simdjson::error_message(error)));
  }
  simdjson::dom::object object;
  if (root.get_object().get(object) != simdjson::SUCCESS) {
    return InvalidArgument("a register body must be a JSON object with 'key' and 'byte_size'");
  }
  SharedMemoryRegisterBody out;
  std::string_view key;
  if (object["key"].get_string().get(key) != simdjson::SUCCESS) {
    return InvalidArgument("'key' must be a string: the shared-memory object's name");
  }
  out.key = std::string(key);
  if (object["byte_size"].get_uint64().get(out.byte_size) != simdjson::SUCCESS) {
    return InvalidArgument("'byte_size' must be a non-negative integer");
  }
  simdjson::dom::element offset;
  if (object["offset"].get(offset) == simdjson::SUCCESS &&
      offset.get_uint64().get(out.offset) != simdjson::SUCCESS) {
    return InvalidArgument("'offset' must be a non-negative integer");
  }
  return out;
}

std::string SharedMemoryStatusJson(const std::vector<SharedMemoryRegionStatus>& regions) {
  std::string out = "[";
  for (size_t i = 0; i < regions.size(); ++i) {
    if (i > 0) out += ',';
    out += "{\"name\":";
    AppendJsonString(out, regions[i].name);
    out += ",\"key\":";
    AppendJsonString(out, regions[i].key);
    out += ",\"offset\":" + std::to_string(regions[i].offset);
    out += ",\"byte_size\":" + std::to_string(regions[i].byte_size) + "}";
  }
  out += ']';
  return out;
}

}  // namespace packrat
