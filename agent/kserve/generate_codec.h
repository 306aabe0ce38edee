// The generate extension's JSON, with token ids instead of text:
//
//   POST /v2/models/{m}/generate | /generate_stream
//   {"input_ids": [int, ...],
//    "parameters": {"max_tokens": N, "top_k": K, "temperature": T, "stop_ids": [int, ...],
//                   "seed": S}}                                  (every parameter optional)
//   -> {"model_name": m, "output_ids": [int, ...], "finish_reason": "stop" | "length"}
//
// The stream is server-sent events, one per token: `data: {"index": i, "token_id": t}` (with
// "prob" when sampled among the top k), the last one also carrying "finish_reason"; an error
// after the stream began is an `event: error` with `{"error": ...}`.
//
// Pure functions; thread-safe. Errors are kInvalidArgument with what is wrong.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace packrat {

struct GenerateLimits {
  int64_t vocab = 0;              // token ids must be below it
  int64_t max_prompt_tokens = 0;  // prompt length limit (max_len - 1 of the model, or less)
  int64_t max_tokens = 256;       // the most tokens a request may ask for
  int64_t default_max_tokens = 16;
};

struct GenerateCall {
  std::vector<int64_t> input_ids;
  int64_t max_tokens = 0;
  int64_t top_k = 1;              // 1 = greedy
  double temperature = 1;         // 0 or a top_k of 1 = greedy
  std::vector<int64_t> stop_ids;  // at most 8
  uint64_t seed = 0;
};

StatusOr<GenerateCall> DecodeGenerateRequest(std::string_view body, const GenerateLimits& limits);

std::string EncodeGenerateResponse(std::string_view model, const std::vector<int32_t>& output_ids,
                                   std::string_view finish_reason);
// One server-sent event for token `index`; `prob` < 0 is left out; `finish_reason` empty for
// all but the last.
std::string EncodeTokenEvent(int64_t index, int32_t token, float prob,
                             std::string_view finish_reason);
std::string EncodeErrorEvent(std::string_view message);

}  // namespace packrat
