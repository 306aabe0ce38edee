#include "agent/kserve/generate_codec.h"

#include <simdjson.h>

#include <cmath>

#include "agent/kserve/kserve_codec.h"

namespace packrat {
namespace {

using simdjson::dom::element;
using simdjson::dom::object;

constexpr size_t kMaxStopIds = 8;

Status Bad(const std::string& what) { return InvalidArgument("generate request: " + what); }

StatusOr<int64_t> Integer(const element& e, const std::string& name) {
  int64_t v = 0;
  if (e.get_int64().get(v) != simdjson::SUCCESS) return Bad(name + " must be an integer");
  return v;
}

StatusOr<std::vector<int64_t>> Ids(const element& e, const std::string& name, int64_t vocab) {
  simdjson::dom::array array;
  if (e.get_array().get(array) != simdjson::SUCCESS) return Bad(name + " must be an array");
  std::vector<int64_t> ids;
  for (element item : array) {
    ASSIGN_OR_RETURN(int64_t id, Integer(item, name + " entries"));
    if (id < 0 || (vocab > 0 && id >= vocab)) {
      return Bad(name + " holds " + std::to_string(id) + "; token ids are in [0, " +
                 std::to_string(vocab) + ")");
    }
    ids.push_back(id);
  }
  return ids;
}

}  // namespace

StatusOr<GenerateCall> DecodeGenerateRequest(std::string_view body, const GenerateLimits& limits) {
  simdjson::dom::parser parser;
  element doc;
  if (parser.parse(body.data(), body.size()).get(doc) != simdjson::SUCCESS) {
    return Bad("the body is not valid JSON");
  }
  object root;
  if (doc.get_object().get(root) != simdjson::SUCCESS) return Bad("the body must be an object");
  GenerateCall call;
  call.max_tokens = limits.default_max_tokens;
  bool have_ids = false;
  for (auto [key, value] : root) {
    if (key == "input_ids") {
      ASSIGN_OR_RETURN(call.input_ids, Ids(value, "input_ids", limits.vocab));
      have_ids = true;
    } else if (key == "parameters") {
      object params;
      if (value.get_object().get(params) != simdjson::SUCCESS) {
        return Bad("parameters must be an object");
      }
      for (auto [pkey, pvalue] : params) {
        const std::string name = "parameters." + std::string(pkey);
        if (pkey == "max_tokens") {
          ASSIGN_OR_RETURN(call.max_tokens, Integer(pvalue, name));
          if (call.max_tokens < 1 || call.max_tokens > limits.max_tokens) {
            return Bad(name + " must be between 1 and " + std::to_string(limits.max_tokens));
          }
        } else if (pkey == "top_k") {
          ASSIGN_OR_RETURN(call.top_k, Integer(pvalue, name));
          if (call.top_k < 1 || (limits.vocab > 0 && call.top_k > limits.vocab)) {
            return Bad(name + " must be between 1 and the vocabulary size (" +
                       std::to_string(limits.vocab) + ")");
          }
        } else if (pkey == "temperature") {
          if (pvalue.get_double().get(call.temperature) != simdjson::SUCCESS) {
            int64_t whole = 0;
            if (pvalue.get_int64().get(whole) != simdjson::SUCCESS) {
              return Bad(name + " must be a number");
            }
            call.temperature = static_cast<double>(whole);
          }
          if (!(call.temperature >= 0) || !std::isfinite(call.temperature)) {
            return Bad(name + " must be >= 0");
          }
        } else if (pkey == "stop_ids") {
          ASSIGN_OR_RETURN(call.stop_ids, Ids(pvalue, name, limits.vocab));
          if (call.stop_ids.size() > kMaxStopIds) {
            return Bad(name + " may hold at most " + std::to_string(kMaxStopIds) + " ids");
          }
        } else if (pkey == "seed") {
          ASSIGN_OR_RETURN(int64_t seed, Integer(pvalue, name));
          call.seed = static_cast<uint64_t>(seed);
        } else {
          return Bad("unknown parameter '" + std::string(pkey) +
                     "' (known: max_tokens, top_k, temperature, stop_ids, seed)");
        }
      }
    } else {
      return Bad("unknown field '" + std::string(key) + "' (known: input_ids, parameters)");
    }
  }
  if (!have_ids || call.input_ids.empty()) return Bad("input_ids must hold at least one id");
  if (limits.max_prompt_tokens > 0 &&
      static_cast<int64_t>(call.input_ids.size()) > limits.max_prompt_tokens) {
    return Bad("input_ids holds " + std::to_string(call.input_ids.size()) +
               " ids; this model takes at most " + std::to_string(limits.max_prompt_tokens));
  }
  if (call.temperature == 0) call.top_k = 1;  // temperature 0 means greedy
  if (call.top_k == 1) call.temperature = 1;
  return call;
}

std::string EncodeGenerateResponse(std::string_view model, const std::vector<int32_t>& output_ids,
                                   std::string_view finish_reason) {
  std::string out = "{\"model_name\":";
  AppendJsonString(out, model);
  out += ",\"output_ids\":[";
  for (size_t i = 0; i < output_ids.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(output_ids[i]);
  }
  out += "],\"finish_reason\":";
  AppendJsonString(out, finish_reason);
  out += '}';
  return out;
}

std::string EncodeTokenEvent(int64_t index, int32_t token, float prob,
                             std::string_view finish_reason) {
  std::string out =
      "data: {\"index\":" + std::to_string(index) + ",\"token_id\":" + std::to_string(token);
  if (prob >= 0) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), ",\"prob\":%.6g", prob);
    out += buf;
  }
  if (!finish_reason.empty()) {
    out += ",\"finish_reason\":";
    AppendJsonString(out, finish_reason);
  }
  out += "}\n\n";
  return out;
}

std::string EncodeErrorEvent(std::string_view message) {
  return "event: error\ndata: " + ErrorJson(message) + "\n\n";
}

}  // namespace packrat
