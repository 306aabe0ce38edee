// JSON tensor data of the KServe v2 protocol: a request input's `data` (nested arrays of JSON
// numbers or booleans) into tensor bytes, and tensor bytes into a response output's `data` —
// for every datatype, with the conversions and checks KServe clients expect (FP16 and BF16
// rounded once; integers range-checked; booleans as 0/1). Internal to the KServe codec.
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "agent/kserve/tensor.h"
#include "common/datatype.h"
#include "common/status.h"

namespace packrat::kserve_internal {

// Converts `data` (of a request of `json_size` bytes) into exactly `count` elements of `type`
// in `out`, the input `input` of `shape`. InvalidArgument naming the input and the first
// element that does not fit, or the element counts where they differ.
Status DecodeJsonData(const simdjson::dom::element& data, std::string_view input, DataType type,
                      const std::vector<int64_t>& shape, size_t count, size_t json_size,
                      std::vector<uint8_t>* out);

// Upper bound on the characters of one JSON element of `type`, comma included.
size_t MaxElementChars(DataType type);
// Appends the `count` elements at `data` as a flat JSON array.
void AppendJsonData(std::string& out, DataType type, const uint8_t* data, size_t count);

}  // namespace packrat::kserve_internal
