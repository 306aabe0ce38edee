#include "agent/kserve/kserve_codec.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "agent/kserve/tensor.h"
#include "tests/support/shm_object.h"

namespace packrat {
namespace {

std::shared_ptr<const std::string> Body(std::string s) {
  return std::make_shared<const std::string>(std::move(s));
}

StatusOr<DecodedRequest> DecodeJson(const ModelSignature& sig, std::string json) {
  return DecodeInferRequest(sig, Body(std::move(json)), std::nullopt);
}

StatusOr<DecodedRequest> DecodeWithBinary(const ModelSignature& sig, const std::string& json,
                                          const std::string& binary) {
  return DecodeInferRequest(sig, Body(json + binary), json.size());
}

// Model "m" with input "x" and output "y", both of `type`.
ModelSignature Sig(DataType type, std::vector<int64_t> in_shape,
                   std::vector<int64_t> out_shape = {-1, 1}) {
  ModelSignature sig;
  sig.name = "m";
  sig.inputs = {{"x", type, std::move(in_shape)}};
  sig.outputs = {{"y", type, std::move(out_shape)}};
  return sig;
}

// Model "m" with FP32 inputs a [-1,2] and b [-1,3], outputs p [-1,1], q [-1,2], r [-1,3].
ModelSignature TwoInputSig() {
  ModelSignature sig;
  sig.name = "m";
  sig.inputs = {{"a", DataType::kFp32, {-1, 2}}, {"b", DataType::kFp32, {-1, 3}}};
  sig.outputs = {{"p", DataType::kFp32, {-1, 1}},
                 {"q", DataType::kFp32, {-1, 2}},
                 {"r", DataType::kFp32, {-1, 3}}};
  return sig;
}

template <typename T>
std::string Bytes(std::initializer_list<T> values) {
  std::string out;
  for (T v : values) out.append(reinterpret_cast<const char*>(&v), sizeof(T));
  return out;
}

std::string ViewBytes(const TensorView& view) {
  return std::string(reinterpret_cast<const char*>(view.data), view.byte_size);
}

std::string Input(std::string_view name, std::string_view shape, std::string_view type,
                  std::string_view data) {
  return "{\"name\":\"" + std::string(name) + "\",\"shape\":" + std::string(shape) +
         ",\"datatype\":\"" + std::string(type) + "\",\"data\":" + std::string(data) + "}";
}

std::string BinaryInput(std::string_view name, std::string_view shape, std::string_view type,
                        size_t size) {
  return "{\"name\":\"" + std::string(name) + "\",\"shape\":" + std::string(shape) +
         ",\"datatype\":\"" + std::string(type) +
         "\",\"parameters\":{\"binary_data_size\":" + std::to_string(size) + "}}";
}

std::string Request(const std::vector<std::string>& inputs, std::string_view extra = "") {
  std::string out = "{";
  out += extra;
  out += "\"inputs\":[";
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i > 0) out += ',';
    out += inputs[i];
  }
  out += "]}";
  return out;
}

void ExpectInvalid(const StatusOr<DecodedRequest>& result, std::string_view substring) {
  ASSERT_FALSE(result.ok()) << "expected an error containing: " << substring;
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument) << result.status().ToString();
  EXPECT_NE(result.status().message().find(substring), std::string::npos)
      << "message: " << result.status().message() << "\nexpected to contain: " << substring;
}

// The rows of a response's "outputs" as (name, has data, binary_data_size or -1).
struct OutputSummary {
  std::string name;
  bool has_data;
  int64_t binary_size;
};

std::vector<OutputSummary> SummarizeOutputs(std::string_view header) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  EXPECT_EQ(parser.parse(header.data(), header.size()).get(root), simdjson::SUCCESS) << header;
  std::vector<OutputSummary> out;
  simdjson::dom::array outputs;
  EXPECT_EQ(root["outputs"].get_array().get(outputs), simdjson::SUCCESS);
  for (simdjson::dom::element o : outputs) {
    OutputSummary s;
    std::string_view name;
    EXPECT_EQ(o["name"].get_string().get(name), simdjson::SUCCESS);
    s.name = std::string(name);
    simdjson::dom::element ignored;
    s.has_data = o["data"].get(ignored) == simdjson::SUCCESS;
    int64_t size = -1;
    if (o["parameters"]["binary_data_size"].get_int64().get(size) != simdjson::SUCCESS) size = -1;
    s.binary_size = size;
    out.push_back(s);
  }
  return out;
}

struct TypeCase {
  DataType type;
  std::string json;   // canonical JSON text of three elements, as the encoder prints them
  std::string bytes;  // the same three elements in memory
};

std::vector<TypeCase> AllTypeCases() {
  return {
      {DataType::kBool, "[true,false,true]", Bytes<uint8_t>({1, 0, 1})},
      {DataType::kUint8, "[0,255,7]", Bytes<uint8_t>({0, 255, 7})},
      {DataType::kInt8, "[-128,127,0]", Bytes<int8_t>({-128, 127, 0})},
      {DataType::kInt16, "[-32768,32767,1]", Bytes<int16_t>({-32768, 32767, 1})},
      {DataType::kInt32, "[-2147483648,2147483647,5]",
       Bytes<int32_t>({std::numeric_limits<int32_t>::min(), 2147483647, 5})},
      {DataType::kInt64, "[-9223372036854775808,9223372036854775807,5]",
       Bytes<int64_t>(
           {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), 5})},
      {DataType::kFp16, "[1.5,-2,65504]",
       Bytes<uint16_t>({FloatToHalf(1.5f), FloatToHalf(-2.0f), FloatToHalf(65504.0f)})},
      {DataType::kFp32, "[0.1,-2.5,3e+38]", Bytes<float>({0.1f, -2.5f, 3e38f})},
      {DataType::kFp64, "[0.1,-2.5,1e+300]", Bytes<double>({0.1, -2.5, 1e300})},
      {DataType::kBf16, "[1,-2.5,0.5]", Bytes<uint16_t>({0x3f80, 0xc020, 0x3f00})},
  };
}

TEST(KserveCodecTest, JsonRoundTripEveryDatatype) {
  for (const TypeCase& c : AllTypeCases()) {
    const std::string type(DataTypeName(c.type));
    SCOPED_TRACE(type);
    const ModelSignature sig = Sig(c.type, {-1, 3}, {-1, 3});
    auto req = DecodeJson(sig, Request({Input("x", "[1,3]", type, c.json)}));
    ASSERT_TRUE(req.ok()) << req.status().ToString();
    ASSERT_EQ(req->inputs.size(), 1u);
    EXPECT_EQ(req->rows, 1);
    EXPECT_EQ(req->inputs[0].datatype, c.type);
    EXPECT_EQ(req->inputs[0].shape, (std::vector<int64_t>{1, 3}));
    EXPECT_EQ(ViewBytes(req->inputs[0]), c.bytes);

    const TensorView out{"y", c.type, {1, 3}, req->inputs[0].data, req->inputs[0].byte_size};
    auto resp = EncodeInferResponse(sig, *req, {out});
    ASSERT_TRUE(resp.ok()) << resp.status().ToString();
    EXPECT_EQ(resp->content_type, "application/json");
    EXPECT_FALSE(resp->header_length.has_value());
    EXPECT_EQ(resp->body,
              "{\"model_name\":\"m\",\"model_version\":\"1\",\"outputs\":[{\"name\":"
              "\"y\",\"datatype\":\"" +
                  type + "\",\"shape\":[1,3],\"data\":" + c.json + "}]}");
  }
}

TEST(KserveCodecTest, BinaryRoundTripEveryDatatype) {
  for (const TypeCase& c : AllTypeCases()) {
    const std::string type(DataTypeName(c.type));
    SCOPED_TRACE(type);
    const ModelSignature sig = Sig(c.type, {-1, 3}, {-1, 3});
    const std::string json = Request({BinaryInput("x", "[1,3]", type, c.bytes.size())},
                                     "\"parameters\":{\"binary_data_output\":true},");
    auto req = DecodeWithBinary(sig, json, c.bytes);
    ASSERT_TRUE(req.ok()) << req.status().ToString();
    EXPECT_TRUE(req->binary_data_output);
    EXPECT_EQ(ViewBytes(req->inputs[0]), c.bytes);

    const TensorView out{"y", c.type, {1, 3}, req->inputs[0].data, req->inputs[0].byte_size};
    auto resp = EncodeInferResponse(sig, *req, {out});
    ASSERT_TRUE(resp.ok()) << resp.status().ToString();
    EXPECT_EQ(resp->content_type, "application/octet-stream");
    const std::string header =
        "{\"model_name\":\"m\",\"model_version\":\"1\",\"outputs\":[{\"name\":\"y\","
        "\"datatype\":\"" +
        type + "\",\"shape\":[1,3],\"parameters\":{\"binary_data_size\":" +
        std::to_string(c.bytes.size()) + "}}]}";
    ASSERT_TRUE(resp->header_length.has_value());
    EXPECT_EQ(*resp->header_length, header.size());
    EXPECT_EQ(resp->body, header + c.bytes);
  }
}

TEST(KserveCodecTest, NestedDataFlattensRowMajor) {
  const ModelSignature sig = Sig(DataType::kInt32, {-1, 2, 3});
  auto nested = DecodeJson(
      sig, Request({Input("x", "[2,2,3]", "INT32", "[[[1,2,3],[4,5,6]],[[7,8,9],[10,11,12]]]")}));
  auto flat =
      DecodeJson(sig, Request({Input("x", "[2,2,3]", "INT32", "[1,2,3,4,5,6,7,8,9,10,11,12]")}));
  ASSERT_TRUE(nested.ok()) << nested.status().ToString();
  ASSERT_TRUE(flat.ok()) << flat.status().ToString();
  EXPECT_EQ(nested->rows, 2);
  EXPECT_EQ(ViewBytes(nested->inputs[0]), ViewBytes(flat->inputs[0]));
  EXPECT_EQ(ViewBytes(flat->inputs[0]), Bytes<int32_t>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}));
}

TEST(KserveCodecTest, JsonNumbersConvert) {
  // Integers are fine for floats; FP16 rounds through FloatToHalf.
  auto fp32 =
      DecodeJson(Sig(DataType::kFp32, {-1, 2}), Request({Input("x", "[1,2]", "FP32", "[3,-1e2]")}));
  ASSERT_TRUE(fp32.ok()) << fp32.status().ToString();
  EXPECT_EQ(ViewBytes(fp32->inputs[0]), Bytes<float>({3.0f, -100.0f}));
  auto fp16 = DecodeJson(Sig(DataType::kFp16, {-1, 2}),
                         Request({Input("x", "[1,2]", "FP16", "[0.1,1e6]")}));
  ASSERT_TRUE(fp16.ok()) << fp16.status().ToString();
  EXPECT_EQ(ViewBytes(fp16->inputs[0]), Bytes<uint16_t>({FloatToHalf(0.1f), 0x7c00}));
}

// JSON numbers round once to FP16 and BF16. Just above a tie (by 2^-40, below float's
// precision): rounding to float first would land on the tie and round it to even, down.
TEST(KserveCodecTest, HalfPrecisionJsonNumbersRoundOnce) {
  // 1 + 2^-11 + 2^-40: above FP16's tie between 1 and 1 + 2^-10; and its negation.
  auto fp16 = DecodeJson(
      Sig(DataType::kFp16, {-1, 4}),
      Request({Input("x", "[1,4]", "FP16",
                     "[1.000488281250909494701772928238,-1.000488281250909494701772928238,"
                     "1.00048828125,65519.99]")}));
  ASSERT_TRUE(fp16.ok()) << fp16.status().ToString();
  // The exact tie still goes to even (1.0); 65519.99 rounds to the largest half, not to Inf.
  EXPECT_EQ(ViewBytes(fp16->inputs[0]), Bytes<uint16_t>({0x3c01, 0xbc01, 0x3c00, 0x7bff}));
  // 1 + 2^-8 + 2^-40: above BF16's tie between 1 and 1 + 2^-7.
  auto bf16 = DecodeJson(Sig(DataType::kBf16, {-1, 3}),
                         Request({Input("x", "[1,3]", "BF16",
                                        "[1.003906250000909494701772928238,1.00390625,1e300]")}));
  ASSERT_TRUE(bf16.ok()) << bf16.status().ToString();
  EXPECT_EQ(ViewBytes(bf16->inputs[0]), Bytes<uint16_t>({0x3f81, 0x3f80, 0x7f80}));
}

TEST(KserveCodecTest, BinaryInputIsZeroCopy) {
  const ModelSignature sig = Sig(DataType::kFp32, {-1, 2});
  const std::string json = Request({BinaryInput("x", "[2,2]", "FP32", 16)});
  const std::string data = Bytes<float>({1, 2, 3, 4});
  auto body = Body(json + data);
  auto req = DecodeInferRequest(sig, body, json.size());
  ASSERT_TRUE(req.ok()) << req.status().ToString();
  EXPECT_EQ(req->body, body);
  EXPECT_TRUE(req->owned.empty());
  const auto* begin = reinterpret_cast<const uint8_t*>(body->data());
  EXPECT_EQ(req->inputs[0].data, begin + json.size());
  EXPECT_EQ(req->inputs[0].byte_size, 16u);
  EXPECT_EQ(ViewBytes(req->inputs[0]), data);
}

TEST(KserveCodecTest, MixedJsonAndBinaryInputs) {
  ModelSignature sig;
  sig.name = "m";
  sig.inputs = {{"a", DataType::kInt64, {-1, 1}},
                {"b", DataType::kFp32, {-1, 2}},
                {"c", DataType::kUint8, {-1, 3}}};
  sig.outputs = {{"y", DataType::kFp32, {-1, 1}}};
  // Binary sections follow the order of the request's inputs (c, then a), not the signature.
  const std::string c_bytes = Bytes<uint8_t>({1, 2, 3});
  const std::string a_bytes = Bytes<int64_t>({42});
  const std::string json =
      Request({BinaryInput("c", "[1,3]", "UINT8", 3), Input("b", "[1,2]", "FP32", "[0.5,1.5]"),
               BinaryInput("a", "[1,1]", "INT64", 8)});
  auto req = DecodeWithBinary(sig, json, c_bytes + a_bytes);
  ASSERT_TRUE(req.ok()) << req.status().ToString();
  ASSERT_EQ(req->inputs.size(), 3u);
  EXPECT_EQ(req->inputs[0].name, "a");
  EXPECT_EQ(req->inputs[1].name, "b");
  EXPECT_EQ(req->inputs[2].name, "c");
  EXPECT_EQ(ViewBytes(req->inputs[0]), a_bytes);
  EXPECT_EQ(ViewBytes(req->inputs[1]), Bytes<float>({0.5f, 1.5f}));
  EXPECT_EQ(ViewBytes(req->inputs[2]), c_bytes);
  EXPECT_EQ(req->owned.size(), 1u);
  EXPECT_EQ(req->inputs[0].data,
            reinterpret_cast<const uint8_t*>(req->body->data()) + json.size() + 3);
}

TEST(KserveCodecTest, JsonBodyWithEmptyBinarySection) {
  // A header length equal to the body size is a JSON-only request.
  const ModelSignature sig = Sig(DataType::kFp32, {-1, 1});
  auto req = DecodeWithBinary(sig, Request({Input("x", "[1,1]", "FP32", "[1]")}), "");
  ASSERT_TRUE(req.ok()) << req.status().ToString();
}

TEST(KserveCodecTest, ParsesIdParametersAndRequestedOutputs) {
  const ModelSignature sig = TwoInputSig();
  const std::string json =
      "{\"id\":\"req-7\",\"parameters\":{\"timeout\":12345,\"binary_data_output\":true,"
      "\"priority\":3,\"custom\":{\"x\":[1]}},"
      "\"inputs\":[" +
      Input("a", "[1,2]", "FP32", "[1,2]") + "," + Input("b", "[1,3]", "FP32", "[1,2,3]") +
      "],\"outputs\":[{\"name\":\"r\"},{\"name\":\"p\",\"parameters\":{\"binary_data\":false}},"
      "{\"name\":\"q\",\"parameters\":{\"binary_data\":true,\"other\":1}}]}";
  auto req = DecodeJson(sig, json);
  ASSERT_TRUE(req.ok()) << req.status().ToString();
  EXPECT_EQ(req->id, "req-7");
  ASSERT_TRUE(req->timeout_us.has_value());
  EXPECT_EQ(*req->timeout_us, 12345u);
  EXPECT_TRUE(req->binary_data_output);
  ASSERT_EQ(req->outputs.size(), 3u);
  EXPECT_EQ(req->outputs[0].name, "r");
  EXPECT_TRUE(req->outputs[0].binary);  // inherits binary_data_output
  EXPECT_EQ(req->outputs[1].name, "p");
  EXPECT_FALSE(req->outputs[1].binary);  // explicit binary_data=false wins
  EXPECT_EQ(req->outputs[2].name, "q");
  EXPECT_TRUE(req->outputs[2].binary);
}

TEST(KserveCodecTest, DefaultsWithoutParameters) {
  auto req =
      DecodeJson(Sig(DataType::kFp32, {-1, 1}), Request({Input("x", "[1,1]", "FP32", "[1]")}));
  ASSERT_TRUE(req.ok()) << req.status().ToString();
  EXPECT_TRUE(req->id.empty());
  EXPECT_FALSE(req->timeout_us.has_value());
  EXPECT_FALSE(req->binary_data_output);
  EXPECT_TRUE(req->outputs.empty());
}

TEST(KserveCodecTest, VariableAndZeroSizedDims) {
  ModelSignature sig = Sig(DataType::kFp32, {-1, -1, 2});
  auto req = DecodeJson(sig, Request({Input("x", "[1,3,2]", "FP32", "[[1,2],[3,4],[5,6]]")}));
  ASSERT_TRUE(req.ok()) << req.status().ToString();
  EXPECT_EQ(req->inputs[0].byte_size, 24u);
  auto empty = DecodeJson(sig, Request({Input("x", "[1,0,2]", "FP32", "[]")}));
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_EQ(empty->inputs[0].byte_size, 0u);
}

std::vector<TensorView> ThreeOutputs(const std::vector<std::string>& storage) {
  return {{"p", DataType::kFp32, {1, 1}, reinterpret_cast<const uint8_t*>(storage[0].data()), 4},
          {"q", DataType::kFp32, {1, 2}, reinterpret_cast<const uint8_t*>(storage[1].data()), 8},
          {"r", DataType::kFp32, {1, 3}, reinterpret_cast<const uint8_t*>(storage[2].data()), 12}};
}

TEST(KserveCodecTest, EncodesRequestedOutputsInRequestedOrder) {
  const ModelSignature sig = TwoInputSig();
  const std::vector<std::string> storage = {Bytes<float>({1}), Bytes<float>({2, 3}),
                                            Bytes<float>({4, 5, 6})};
  DecodedRequest req;
  req.id = "abc";
  req.outputs = {{"r", false, std::nullopt}, {"p", false, std::nullopt}};
  auto resp = EncodeInferResponse(sig, req, ThreeOutputs(storage));
  ASSERT_TRUE(resp.ok()) << resp.status().ToString();
  EXPECT_EQ(resp->content_type, "application/json");
  EXPECT_EQ(resp->body,
            "{\"model_name\":\"m\",\"model_version\":\"1\",\"id\":\"abc\",\"outputs\":["
            "{\"name\":\"r\",\"datatype\":\"FP32\",\"shape\":[1,3],\"data\":[4,5,6]},"
            "{\"name\":\"p\",\"datatype\":\"FP32\",\"shape\":[1,1],\"data\":[1]}]}");
}

TEST(KserveCodecTest, BinaryDataOutputAppliesToAllOutputs) {
  const ModelSignature sig = TwoInputSig();
  const std::vector<std::string> storage = {Bytes<float>({1}), Bytes<float>({2, 3}),
                                            Bytes<float>({4, 5, 6})};
  DecodedRequest req;
  req.binary_data_output = true;
  auto resp = EncodeInferResponse(sig, req, ThreeOutputs(storage));
  ASSERT_TRUE(resp.ok()) << resp.status().ToString();
  EXPECT_EQ(resp->content_type, "application/octet-stream");
  ASSERT_TRUE(resp->header_length.has_value());
  const std::string_view body = resp->body;
  const std::string_view header = body.substr(0, *resp->header_length);
  const auto outputs = SummarizeOutputs(header);
  ASSERT_EQ(outputs.size(), 3u);
  EXPECT_EQ(outputs[0].name, "p");
  EXPECT_EQ(outputs[1].name, "q");
  EXPECT_EQ(outputs[2].name, "r");
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_FALSE(outputs[i].has_data);
    EXPECT_EQ(outputs[i].binary_size, static_cast<int64_t>(4 * (i + 1)));
  }
  EXPECT_EQ(body.substr(*resp->header_length), storage[0] + storage[1] + storage[2]);
}

TEST(KserveCodecTest, MixedBinaryAndJsonOutputsFromDecodedRequest) {
  const ModelSignature sig = TwoInputSig();
  const std::string json =
      "{\"parameters\":{\"binary_data_output\":true},\"inputs\":[" +
      Input("a", "[1,2]", "FP32", "[1,2]") + "," + Input("b", "[1,3]", "FP32", "[1,2,3]") +
      "],\"outputs\":[{\"name\":\"r\"},{\"name\":\"q\",\"parameters\":{\"binary_data\":false}},"
      "{\"name\":\"p\"}]}";
  auto req = DecodeJson(sig, json);
  ASSERT_TRUE(req.ok()) << req.status().ToString();
  const std::vector<std::string> storage = {Bytes<float>({1}), Bytes<float>({2, 3}),
                                            Bytes<float>({4, 5, 6})};
  auto resp = EncodeInferResponse(sig, *req, ThreeOutputs(storage));
  ASSERT_TRUE(resp.ok()) << resp.status().ToString();
  ASSERT_TRUE(resp->header_length.has_value());
  const std::string_view body = resp->body;
  const auto outputs = SummarizeOutputs(body.substr(0, *resp->header_length));
  ASSERT_EQ(outputs.size(), 3u);
  EXPECT_EQ(outputs[0].name, "r");
  EXPECT_EQ(outputs[0].binary_size, 12);
  EXPECT_EQ(outputs[1].name, "q");
  EXPECT_TRUE(outputs[1].has_data);
  EXPECT_EQ(outputs[1].binary_size, -1);
  EXPECT_EQ(outputs[2].name, "p");
  EXPECT_EQ(outputs[2].binary_size, 4);
  EXPECT_EQ(body.substr(*resp->header_length), storage[2] + storage[0]);
}

// The system shared-memory extension: an input read from a client's region (the view points
// into it: no copy), an output written into another, only references on the wire.
TEST(KserveCodecTest, InputsAndOutputsInSharedMemory) {
  const ModelSignature sig = TwoInputSig();
  testing::ShmObject object(4096);
  SharedMemoryRegistry regions;
  ASSERT_TRUE(regions.Register("in", object.key(), 0, 1024).ok());
  ASSERT_TRUE(regions.Register("out", object.key(), 2048, 1024).ok());
  const std::string b = Bytes<float>({4, 5, 6});
  std::memcpy(object.data() + 16, b.data(), b.size());
  const std::string json =
      "{\"inputs\":[" + Input("a", "[1,2]", "FP32", "[1,2]") +
      ",{\"name\":\"b\",\"shape\":[1,3],\"datatype\":\"FP32\",\"parameters\":{"
      "\"shared_memory_region\":\"in\",\"shared_memory_byte_size\":12,"
      "\"shared_memory_offset\":16}}],\"outputs\":[{\"name\":\"r\",\"parameters\":{"
      "\"shared_memory_region\":\"out\",\"shared_memory_byte_size\":100,"
      "\"shared_memory_offset\":8}},{\"name\":\"p\"}]}";
  auto req = DecodeInferRequest(sig, Body(json), std::nullopt, &regions);
  ASSERT_TRUE(req.ok()) << req.status().ToString();
  ASSERT_EQ(req->input_regions.size(), 1u);
  EXPECT_EQ(req->inputs[1].data, req->input_regions[0].data);  // the agent's own mapping
  EXPECT_EQ(ViewBytes(req->inputs[1]), b);
  // Requests hold their regions: neither may go while this one is in flight.
  EXPECT_EQ(regions.Unregister("in").code(), StatusCode::kAborted);
  EXPECT_EQ(regions.Unregister("out").code(), StatusCode::kAborted);

  const std::vector<std::string> storage = {Bytes<float>({1}), Bytes<float>({2, 3}),
                                            Bytes<float>({7, 8, 9})};
  auto resp = EncodeInferResponse(sig, *req, ThreeOutputs(storage));
  ASSERT_TRUE(resp.ok()) << resp.status().ToString();
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(object.data() + 2048 + 8), 12), storage[2]);
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  ASSERT_EQ(parser.parse(resp->body).get(root), simdjson::SUCCESS) << resp->body;
  simdjson::dom::element r = root["outputs"].at(0);
  simdjson::dom::element ignored;
  EXPECT_NE(r["data"].get(ignored), simdjson::SUCCESS) << resp->body;  // no data on the wire
  EXPECT_EQ(std::string_view(r["parameters"]["shared_memory_region"]), "out");
  EXPECT_EQ(int64_t(r["parameters"]["shared_memory_byte_size"]), 12);
  EXPECT_EQ(int64_t(r["parameters"]["shared_memory_offset"]), 8);
  EXPECT_EQ(resp->content_type, "application/json");

  req = StatusOr<DecodedRequest>(InvalidArgument("released"));
  EXPECT_TRUE(regions.Unregister("in").ok());
}

TEST(KserveCodecTest, RejectsBadSharedMemoryReferences) {
  const ModelSignature sig = Sig(DataType::kFp32, {-1, 2}, {-1, 2});
  testing::ShmObject object(4096);
  SharedMemoryRegistry regions;
  ASSERT_TRUE(regions.Register("r", object.key(), 0, 64).ok());
  auto decode = [&](std::string_view input_params, std::string_view output_params = "",
                    const SharedMemoryRegistry* registry = nullptr) {
    std::string json = "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,2],\"datatype\":\"FP32\"," +
                       std::string(input_params) + "}]";
    if (!output_params.empty()) {
      json += ",\"outputs\":[{\"name\":\"y\",\"parameters\":{" + std::string(output_params) + "}}]";
    }
    return DecodeInferRequest(sig, Body(json + "}"), std::nullopt,
                              registry != nullptr ? registry : &regions);
  };
  const std::string region = "\"shared_memory_region\":\"r\"";
  EXPECT_TRUE(decode("\"parameters\":{" + region + ",\"shared_memory_byte_size\":8}").ok());
  ExpectInvalid(decode("\"parameters\":{" + region + "}"), "needs 'shared_memory_byte_size'");
  ExpectInvalid(decode("\"parameters\":{\"shared_memory_byte_size\":8}"),
                "needs 'shared_memory_region'");
  ExpectInvalid(decode("\"parameters\":{\"shared_memory_region\":5,\"shared_memory_byte_size\":8}"),
                "must be a string");
  ExpectInvalid(decode("\"parameters\":{" + region + ",\"shared_memory_byte_size\":-8}"),
                "non-negative");
  ExpectInvalid(decode("\"parameters\":{" + region + ",\"shared_memory_byte_size\":12}"),
                "needs 8 bytes");
  ExpectInvalid(decode("\"parameters\":{" + region +
                       ",\"shared_memory_byte_size\":8,\"shared_memory_offset\":60}"),
                "beyond region 'r'");
  ExpectInvalid(decode("\"parameters\":{\"shared_memory_region\":\"nope\","
                       "\"shared_memory_byte_size\":8}"),
                "no shared-memory region 'nope'");
  ExpectInvalid(
      decode("\"data\":[1,2],\"parameters\":{" + region + ",\"shared_memory_byte_size\":8}"),
      "also 'data'");
  const SharedMemoryRegistry off({.enabled = false, .key_prefix = "", .dir = "/dev/shm"});
  ExpectInvalid(decode("\"parameters\":{" + region + ",\"shared_memory_byte_size\":8}", "", &off),
                "off");
  ExpectInvalid(DecodeInferRequest(sig,
                                   Body("{\"inputs\":[{\"name\":\"x\",\"shape\":[1,2],"
                                        "\"datatype\":\"FP32\",\"parameters\":{" +
                                        region + ",\"shared_memory_byte_size\":8}}]}"),
                                   std::nullopt),
                "off");
  // Outputs: the same parameters, and not together with binary_data.
  ExpectInvalid(decode("\"data\":[1,2]", region + ",\"shared_memory_byte_size\":100"),
                "beyond region 'r'");
  ExpectInvalid(decode("\"data\":[1,2]", region + ",\"shared_memory_byte_size\":8,"
                                                  "\"binary_data\":true"),
                "both 'binary_data' and 'shared_memory_region'");
  // An output larger than its reference fails the answer, not the process.
  auto req = decode("\"data\":[1,2]", region + ",\"shared_memory_byte_size\":4");
  ASSERT_TRUE(req.ok()) << req.status().ToString();
  const std::string y = Bytes<float>({1, 2});
  const auto resp = EncodeInferResponse(
      sig, *req, {{"y", DataType::kFp32, {1, 2}, reinterpret_cast<const uint8_t*>(y.data()), 8}});
  ASSERT_FALSE(resp.ok());
  EXPECT_EQ(resp.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(resp.status().message().find("holds 4"), std::string::npos) << resp.status().message();
}

TEST(KserveCodecTest, NonFiniteFloatsBecomeNull) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::string fp32 = Bytes<float>({std::nanf(""), inf, -inf, 1.25f});
  const std::string fp16 = Bytes<uint16_t>({0x7e00, 0x7c00, 0xfc00, FloatToHalf(1.25f)});
  const std::string fp64 = Bytes<double>({std::nan(""), 1.25});
  DecodedRequest req;
  {
    const ModelSignature sig = Sig(DataType::kFp32, {-1, 4}, {-1, 4});
    auto resp = EncodeInferResponse(
        sig, req,
        {{"y", DataType::kFp32, {1, 4}, reinterpret_cast<const uint8_t*>(fp32.data()), 16}});
    ASSERT_TRUE(resp.ok()) << resp.status().ToString();
    EXPECT_NE(resp->body.find("\"data\":[null,null,null,1.25]"), std::string::npos) << resp->body;
  }
  {
    const ModelSignature sig = Sig(DataType::kFp16, {-1, 4}, {-1, 4});
    auto resp = EncodeInferResponse(
        sig, req,
        {{"y", DataType::kFp16, {1, 4}, reinterpret_cast<const uint8_t*>(fp16.data()), 8}});
    ASSERT_TRUE(resp.ok()) << resp.status().ToString();
    EXPECT_NE(resp->body.find("\"data\":[null,null,null,1.25]"), std::string::npos) << resp->body;
  }
  {
    const ModelSignature sig = Sig(DataType::kFp64, {-1, 2}, {-1, 2});
    auto resp = EncodeInferResponse(
        sig, req,
        {{"y", DataType::kFp64, {1, 2}, reinterpret_cast<const uint8_t*>(fp64.data()), 16}});
    ASSERT_TRUE(resp.ok()) << resp.status().ToString();
    EXPECT_NE(resp->body.find("\"data\":[null,1.25]"), std::string::npos) << resp->body;
  }
}

TEST(KserveCodecTest, FloatsPrintShortestRoundTrip) {
  const std::vector<float> values = {0.1f, 1.0f / 3.0f, 1e-45f, 3.4028235e38f, -0.0f, 123456.79f};
  std::string bytes;
  for (float v : values) bytes.append(reinterpret_cast<const char*>(&v), sizeof(v));
  const ModelSignature sig = Sig(DataType::kFp32, {-1, 6}, {-1, 6});
  auto resp = EncodeInferResponse(
      sig, DecodedRequest{},
      {{"y", DataType::kFp32, {1, 6}, reinterpret_cast<const uint8_t*>(bytes.data()), 24}});
  ASSERT_TRUE(resp.ok()) << resp.status().ToString();
  // Parse the numbers back: each must reproduce the exact float.
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  ASSERT_EQ(parser.parse(resp->body).get(root), simdjson::SUCCESS);
  simdjson::dom::array data;
  ASSERT_EQ(root["outputs"].at(0)["data"].get_array().get(data), simdjson::SUCCESS);
  size_t i = 0;
  for (simdjson::dom::element e : data) {
    double d = 0;
    ASSERT_EQ(e.get_double().get(d), simdjson::SUCCESS);
    ASSERT_LT(i, values.size());
    EXPECT_EQ(std::bit_cast<uint32_t>(static_cast<float>(d)), std::bit_cast<uint32_t>(values[i]));
    ++i;
  }
  EXPECT_EQ(i, values.size());
  EXPECT_NE(resp->body.find("[0.1,0.33333334,1e-45,3.4028235e+38,-0.0,123456.79]"),
            std::string::npos)
      << resp->body;
}

TEST(KserveCodecTest, EncodeRejectsByteSizeMismatch) {
  const ModelSignature sig = Sig(DataType::kFp32, {-1, 2}, {-1, 2});
  const std::string bytes = Bytes<float>({1, 2, 3});
  auto resp = EncodeInferResponse(
      sig, DecodedRequest{},
      {{"y", DataType::kFp32, {1, 2}, reinterpret_cast<const uint8_t*>(bytes.data()), 12}});
  ASSERT_FALSE(resp.ok());
  EXPECT_EQ(resp.status().code(), StatusCode::kInternal);
  auto negative = EncodeInferResponse(
      sig, DecodedRequest{},
      {{"y", DataType::kFp32, {1, -2}, reinterpret_cast<const uint8_t*>(bytes.data()), 8}});
  ASSERT_FALSE(negative.ok());
  EXPECT_EQ(negative.status().code(), StatusCode::kInternal);
}

TEST(KserveCodecTest, EncodeRejectsUnknownRequestedOutput) {
  const ModelSignature sig = Sig(DataType::kFp32, {-1, 1}, {-1, 1});
  const std::string bytes = Bytes<float>({1});
  DecodedRequest req;
  req.outputs = {{"nope", false}};
  auto resp = EncodeInferResponse(
      sig, req,
      {{"y", DataType::kFp32, {1, 1}, reinterpret_cast<const uint8_t*>(bytes.data()), 4}});
  ASSERT_FALSE(resp.ok());
  EXPECT_EQ(resp.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(resp.status().message().find("'nope'"), std::string::npos);
}

TEST(KserveCodecTest, ErrorJsonEscapes) {
  EXPECT_EQ(ErrorJson("plain"), "{\"error\":\"plain\"}");
  EXPECT_EQ(ErrorJson("a\"b\\c\nd\te\r\b\f"), "{\"error\":\"a\\\"b\\\\c\\nd\\te\\r\\b\\f\"}");
  EXPECT_EQ(ErrorJson(std::string("x\x01y\x1f", 4) + std::string(1, '\0')),
            "{\"error\":\"x\\u0001y\\u001f\\u0000\"}");
  // Valid UTF-8 passes through; invalid bytes become U+FFFD so the result stays valid JSON.
  EXPECT_EQ(ErrorJson("caf\xc3\xa9 \xe2\x82\xac"), "{\"error\":\"caf\xc3\xa9 \xe2\x82\xac\"}");
  EXPECT_EQ(ErrorJson("a\xff"
                      "b\xc3"),
            "{\"error\":\"a\\ufffdb\\ufffd\"}");
  EXPECT_EQ(ErrorJson("\xed\xa0\x80"), "{\"error\":\"\\ufffd\\ufffd\\ufffd\"}");  // surrogate

  const std::string message = "input 'x\"\\': bad\n\x02 \xf0\x9f\x98\x80";
  const std::string json = ErrorJson(message);
  simdjson::dom::parser parser;
  std::string_view parsed;
  ASSERT_EQ(parser.parse(json)["error"].get_string().get(parsed), simdjson::SUCCESS) << json;
  EXPECT_EQ(parsed, message);
}

TEST(KserveCodecTest, AppendJsonStringAppends) {
  std::string out = "x=";
  AppendJsonString(out, "a\"b");
  EXPECT_EQ(out, "x=\"a\\\"b\"");
  out.clear();
  AppendJsonString(out, "");
  EXPECT_EQ(out, "\"\"");
}

TEST(KserveCodecTest, TensorHelpers) {
  EXPECT_EQ(ElementCount({2, 3, 4}), 24);
  EXPECT_EQ(ElementCount({}), 1);
  EXPECT_EQ(ElementCount({2, 0}), 0);
  EXPECT_EQ(ElementCount({2, -1}), -1);
  EXPECT_EQ(ElementCount({1LL << 32, 1LL << 32}), -1);
  EXPECT_EQ(ShapeToString({1, 3, 224, 224}), "[1,3,224,224]");
  EXPECT_EQ(ShapeToString({}), "[]");
  EXPECT_EQ((TensorSpec{"t", DataType::kFp32, {-1, 3, 4}}.RowBytes()), 48);
  EXPECT_EQ((TensorSpec{"t", DataType::kInt64, {-1}}.RowBytes()), 8);
  EXPECT_EQ((TensorSpec{"t", DataType::kFp32, {-1, -1, 4}}.RowBytes()), -1);
  EXPECT_EQ((TensorSpec{"t", DataType::kFp64, {-1, 1LL << 61}}.RowBytes()), -1);
}

// ---------------------------------------------------------------------------------------------
// Rejections.

TEST(KserveCodecTest, RejectsMalformedJson) {
  const ModelSignature sig = Sig(DataType::kFp32, {-1, 1});
  ExpectInvalid(DecodeJson(sig, "{\"inputs\": ["), "malformed JSON");
  ExpectInvalid(DecodeJson(sig, ""), "malformed JSON");
  ExpectInvalid(DecodeJson(sig, "{\"inputs\":[]} trailing"), "malformed JSON");
  ExpectInvalid(DecodeJson(sig, "[1,2]"), "JSON object");
  ExpectInvalid(DecodeInferRequest(sig, nullptr, std::nullopt), "empty");
}

TEST(KserveCodecTest, RejectsBadTopLevelFields) {
  const ModelSignature sig = Sig(DataType::kFp32, {-1, 1});
  const std::string x = Input("x", "[1,1]", "FP32", "[1]");
  ExpectInvalid(DecodeJson(sig, "{}"), "missing 'inputs'");
  ExpectInvalid(DecodeJson(sig, "{\"inputs\":{}}"), "'inputs' must be an array");
  ExpectInvalid(DecodeJson(sig, "{\"inputs\":[5]}"), "inputs[0] must be an object");
  ExpectInvalid(DecodeJson(sig, "{\"inputs\":[{\"shape\":[1]}]}"), "'name' must be a string");
  ExpectInvalid(DecodeJson(sig, Request({x}, "\"id\":5,")), "'id' must be a string");
  ExpectInvalid(DecodeJson(sig, Request({x}, "\"parameters\":[],")), "'parameters'");
  ExpectInvalid(DecodeJson(sig, Request({x}, "\"parameters\":{\"timeout\":-1},")), "'timeout'");
  ExpectInvalid(DecodeJson(sig, Request({x}, "\"parameters\":{\"timeout\":1.5},")), "'timeout'");
  // Beyond a day (here: the largest uint64, which as µs would overflow the deadline).
  ExpectInvalid(DecodeJson(sig, Request({x}, "\"parameters\":{\"timeout\":18446744073709551615},")),
                "'timeout' must be at most 86400000000 microseconds");
  // 0 sets no deadline of the request's own, as in Triton.
  auto zero = DecodeJson(sig, Request({x}, "\"parameters\":{\"timeout\":0},"));
  ASSERT_TRUE(zero.ok()) << zero.status().ToString();
  EXPECT_FALSE(zero->timeout_us.has_value());
  ExpectInvalid(DecodeJson(sig, Request({x}, "\"parameters\":{\"binary_data_output\":1},")),
                "'binary_data_output'");
  ExpectInvalid(DecodeJson(sig, Request({x}, "\"outputs\":{},")), "'outputs' must be an array");
  ExpectInvalid(DecodeJson(sig, Request({x}, "\"outputs\":[{\"name\":\"nope\"}],")),
                "unknown output 'nope'");
  ExpectInvalid(DecodeJson(sig, Request({x}, "\"outputs\":[{\"name\":\"y\"},{\"name\":\"y\"}],")),
                "output 'y' requested more than once");
  ExpectInvalid(
      DecodeJson(
          sig, Request({x}, "\"outputs\":[{\"name\":\"y\",\"parameters\":{\"binary_data\":1}}],")),
      "'binary_data' must be a boolean");
}

TEST(KserveCodecTest, RejectsInputSetMismatches) {
  const ModelSignature sig = TwoInputSig();
  const std::string a = Input("a", "[1,2]", "FP32", "[1,2]");
  const std::string b = Input("b", "[1,3]", "FP32", "[1,2,3]");
  ExpectInvalid(DecodeJson(sig, Request({a, b, Input("zz", "[1]", "FP32", "[1]")})),
                "unknown input 'zz'");
  ExpectInvalid(DecodeJson(sig, Request({a})), "missing input 'b'");
  ExpectInvalid(DecodeJson(sig, Request({})), "missing input 'a'");
  ExpectInvalid(DecodeJson(sig, Request({a, b, a})), "input 'a' given more than once");
}

TEST(KserveCodecTest, RejectsDatatypeAndShapeMismatches) {
  const ModelSignature sig = Sig(DataType::kFp32, {-1, 3});
  ExpectInvalid(DecodeJson(sig, Request({Input("x", "[1,3]", "INT64", "[1,2,3]")})),
                "input 'x': expected datatype FP32, got INT64");
  ExpectInvalid(DecodeJson(sig, Request({Input("x", "[1,3]", "BYTES", "[1,2,3]")})),
                "unsupported datatype 'BYTES'");
  ExpectInvalid(DecodeJson(sig, Request({Input("x", "[1,3,1]", "FP32", "[1,2,3]")})),
                "expected rank 2");
  ExpectInvalid(DecodeJson(sig, Request({Input("x", "[3]", "FP32", "[1,2,3]")})),
                "expected rank 2");
  ExpectInvalid(DecodeJson(sig, Request({Input("x", "[1,4]", "FP32", "[1,2,3,4]")})),
                "dimension 1 must be 3");
  ExpectInvalid(DecodeJson(sig, Request({Input("x", "[1,-3]", "FP32", "[1,2,3]")})),
                "negative dimension -3");
  ExpectInvalid(DecodeJson(sig, Request({Input("x", "[-1,3]", "FP32", "[1,2,3]")})),
                "negative dimension -1");
  ExpectInvalid(DecodeJson(sig, Request({Input("x", "[0,3]", "FP32", "[]")})),
                "must be at least 1");
  ExpectInvalid(DecodeJson(sig, Request({Input("x", "[1,3.5]", "FP32", "[1,2,3]")})),
                "'shape' must be an array of integers");
  ExpectInvalid(DecodeJson(sig, Request({Input("x", "\"[1,3]\"", "FP32", "[1,2,3]")})),
                "'shape' must be an array of integers");
  ExpectInvalid(DecodeJson(sig, Request({Input("x", "[1,18446744073709551615]", "FP32", "[1]")})),
                "'shape' must be an array of integers");
  ExpectInvalid(
      DecodeJson(sig, "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"data\":[1]}]}"),
      "missing 'shape'");
}

TEST(KserveCodecTest, RejectsHugeShapes) {
  const ModelSignature sig = Sig(DataType::kFp32, {-1, -1, -1});
  // 2^32 * 2^32 overflows int64 elements; 2^31 * 2^31 elements overflow int64 bytes.
  ExpectInvalid(DecodeJson(sig, Request({Input("x", "[1,4294967296,4294967296]", "FP32", "[1]")})),
                "too many elements");
  ExpectInvalid(DecodeJson(sig, Request({Input("x", "[1,2147483648,2147483648]", "FP32", "[1]")})),
                "too many elements");
  // Large but representable: rejected as a count mismatch without allocating the tensor.
  ExpectInvalid(DecodeJson(sig, Request({Input("x", "[1,1000000,1000000]", "FP32", "[[1,2]]")})),
                "'data' has 2 elements but shape [1,1000000,1000000] needs 1000000000000");
  ExpectInvalid(
      DecodeWithBinary(
          sig, Request({BinaryInput("x", "[1,1000000,1000000]", "FP32", 4000000000000)}), "abcd"),
      "binary data");
}

TEST(KserveCodecTest, RejectsElementCountMismatch) {
  const ModelSignature sig = Sig(DataType::kFp32, {-1, 3});
  ExpectInvalid(DecodeJson(sig, Request({Input("x", "[2,3]", "FP32", "[1,2,3,4,5]")})),
                "'data' has 5 elements but shape [2,3] needs 6");
  ExpectInvalid(DecodeJson(sig, Request({Input("x", "[1,3]", "FP32", "[[1,2],[3,4]]")})),
                "'data' has 4 elements but shape [1,3] needs 3");
  ExpectInvalid(DecodeJson(sig, Request({Input("x", "[1,3]", "FP32", "[]")})),
                "'data' has 0 elements");
}

TEST(KserveCodecTest, RejectsBadElementValues) {
  ExpectInvalid(DecodeJson(Sig(DataType::kInt32, {-1, 2}),
                           Request({Input("x", "[1,2]", "INT32", "[1,1.5]")})),
                "data element 1 must be an integer for INT32");
  ExpectInvalid(DecodeJson(Sig(DataType::kInt32, {-1, 2}),
                           Request({Input("x", "[1,2]", "INT32", "[1,2147483648]")})),
                "out of range for INT32");
  ExpectInvalid(
      DecodeJson(Sig(DataType::kInt8, {-1, 2}), Request({Input("x", "[1,2]", "INT8", "[300,1]")})),
      "data element 0 (300) is out of range for INT8");
  ExpectInvalid(
      DecodeJson(Sig(DataType::kInt8, {-1, 2}), Request({Input("x", "[1,2]", "INT8", "[1,-129]")})),
      "out of range for INT8");
  ExpectInvalid(
      DecodeJson(Sig(DataType::kUint8, {-1, 2}), Request({Input("x", "[1,2]", "UINT8", "[1,-1]")})),
      "out of range for UINT8");
  ExpectInvalid(DecodeJson(Sig(DataType::kUint8, {-1, 2}),
                           Request({Input("x", "[1,2]", "UINT8", "[1,256]")})),
                "out of range for UINT8");
  ExpectInvalid(DecodeJson(Sig(DataType::kInt16, {-1, 1}),
                           Request({Input("x", "[1,1]", "INT16", "[40000]")})),
                "out of range for INT16");
  ExpectInvalid(DecodeJson(Sig(DataType::kInt64, {-1, 1}),
                           Request({Input("x", "[1,1]", "INT64", "[9223372036854775808]")})),
                "out of range for INT64");
  ExpectInvalid(DecodeJson(Sig(DataType::kInt64, {-1, 1}),
                           Request({Input("x", "[1,1]", "INT64", "[\"7\"]")})),
                "must be an integer for INT64, got string");
  ExpectInvalid(DecodeJson(Sig(DataType::kFp32, {-1, 2}),
                           Request({Input("x", "[1,2]", "FP32", "[1,\"2\"]")})),
                "data element 1 must be a number for FP32, got string");
  ExpectInvalid(
      DecodeJson(Sig(DataType::kFp32, {-1, 2}), Request({Input("x", "[1,2]", "FP32", "[1,null]")})),
      "must be a number for FP32, got null");
  ExpectInvalid(
      DecodeJson(Sig(DataType::kFp32, {-1, 2}), Request({Input("x", "[1,2]", "FP32", "[true,1]")})),
      "must be a number for FP32, got boolean");
  ExpectInvalid(
      DecodeJson(Sig(DataType::kBool, {-1, 2}), Request({Input("x", "[1,2]", "BOOL", "[true,1]")})),
      "must be true or false for BOOL, got number");
  ExpectInvalid(
      DecodeJson(Sig(DataType::kFp16, {-1, 1}), Request({Input("x", "[1,1]", "FP16", "[{}]")})),
      "got object");
}

TEST(KserveCodecTest, RejectsDataAndBinaryConflicts) {
  const ModelSignature sig = Sig(DataType::kFp32, {-1, 2});
  ExpectInvalid(DecodeJson(sig,
                           "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,2],\"datatype\":"
                           "\"FP32\"}]}"),
                "needs 'data' or 'binary_data_size'");
  const std::string both =
      "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,2],\"datatype\":\"FP32\",\"data\":[1,2],"
      "\"parameters\":{\"binary_data_size\":8}}]}";
  ExpectInvalid(DecodeWithBinary(sig, both, Bytes<float>({1, 2})),
                "has both 'data' and 'binary_data_size'");
  ExpectInvalid(DecodeJson(sig, Request({BinaryInput("x", "[1,2]", "FP32", 8)})),
                "no Inference-Header-Content-Length");
  ExpectInvalid(
      DecodeWithBinary(sig,
                       "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,2],\"datatype\":\"FP32\","
                       "\"parameters\":{\"binary_data_size\":-8}}]}",
                       ""),
      "'binary_data_size' must be a non-negative integer");
  ExpectInvalid(DecodeWithBinary(sig,
                                 "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,2],\"datatype\":"
                                 "\"FP32\",\"parameters\":7}]}",
                                 ""),
                "'parameters' must be an object");
}

TEST(KserveCodecTest, RejectsBinarySizeMismatches) {
  const ModelSignature sig = Sig(DataType::kFp32, {-1, 2});
  const std::string data = Bytes<float>({1, 2});
  // binary_data_size disagrees with the shape.
  ExpectInvalid(DecodeWithBinary(sig, Request({BinaryInput("x", "[1,2]", "FP32", 4)}), "abcd"),
                "'binary_data_size' is 4 but shape [1,2] of FP32 needs 8 bytes");
  // Too few trailing bytes.
  ExpectInvalid(
      DecodeWithBinary(sig, Request({BinaryInput("x", "[1,2]", "FP32", 8)}), data.substr(0, 7)),
      "binary data");
  // Too many trailing bytes.
  ExpectInvalid(DecodeWithBinary(sig, Request({BinaryInput("x", "[1,2]", "FP32", 8)}), data + "z"),
                "binary data: inputs declare 8 bytes but 9 follow");
  // Trailing bytes on a JSON-only request.
  ExpectInvalid(DecodeWithBinary(sig, Request({Input("x", "[1,2]", "FP32", "[1,2]")}), "junk"),
                "binary data: inputs declare 0 bytes but 4 follow");
  // Header length beyond the body.
  const std::string json = Request({BinaryInput("x", "[1,2]", "FP32", 8)});
  ExpectInvalid(DecodeInferRequest(sig, Body(json + data), json.size() + data.size() + 1),
                "exceeds the body size");
  // Header length that cuts the JSON short.
  ExpectInvalid(DecodeInferRequest(sig, Body(json + data), json.size() - 1), "malformed JSON");
}

TEST(KserveCodecTest, RejectsBatchProblems) {
  ModelSignature sig = TwoInputSig();
  sig.max_batch = 2;
  ExpectInvalid(DecodeJson(sig, Request({Input("a", "[3,2]", "FP32", "[1,2,3,4,5,6]"),
                                         Input("b", "[3,3]", "FP32", "[1,2,3,4,5,6,7,8,9]")})),
                "batch of 3 rows exceeds max_batch 2");
  ExpectInvalid(DecodeJson(sig, Request({Input("a", "[2,2]", "FP32", "[1,2,3,4]"),
                                         Input("b", "[1,3]", "FP32", "[1,2,3]")})),
                "input 'b' has 1 rows but input 'a' has 2");
  auto ok = DecodeJson(sig, Request({Input("a", "[2,2]", "FP32", "[1,2,3,4]"),
                                     Input("b", "[2,3]", "FP32", "[1,2,3,4,5,6]")}));
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->rows, 2);
}

// Truncations and byte flips of valid requests must be rejected cleanly (or accepted), never
// crash; any error is kInvalidArgument. A smoke test for the fuzzer to come.
TEST(KserveCodecTest, SurvivesCorruptedRequests) {
  ModelSignature sig = TwoInputSig();
  sig.inputs[1].datatype = DataType::kInt8;
  const std::string json =
      "{\"id\":\"z\",\"parameters\":{\"binary_data_output\":true,\"timeout\":5},\"inputs\":[" +
      Input("a", "[1,2]", "FP32", "[[1.5,-2]]") + "," + BinaryInput("b", "[1,3]", "INT8", 3) +
      "],\"outputs\":[{\"name\":\"q\",\"parameters\":{\"binary_data\":false}}]}";
  const std::string binary = "\x01\x02\x03";
  ASSERT_TRUE(DecodeWithBinary(sig, json, binary).ok());

  const std::string full = json + binary;
  for (size_t cut = 0; cut <= full.size(); ++cut) {
    auto r = DecodeInferRequest(sig, Body(full.substr(0, cut)), std::min(cut, json.size()));
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    }
    auto j = DecodeJson(sig, full.substr(0, cut));
    if (!j.ok()) {
      EXPECT_EQ(j.status().code(), StatusCode::kInvalidArgument);
    }
  }
  std::mt19937 rng(1234);
  const char kAlphabet[] = "{}[],:\"0123456789-.eE\\ tfnulrsa\x01\xff";
  for (int iter = 0; iter < 3000; ++iter) {
    std::string mutated = full;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      mutated[rng() % json.size()] = kAlphabet[rng() % (sizeof(kAlphabet) - 1)];
    }
    auto r = DecodeInferRequest(sig, Body(mutated), json.size());
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
      // The error must itself be encodable as valid JSON.
      simdjson::dom::parser parser;
      EXPECT_EQ(parser.parse(ErrorJson(r.status().message())).error(), simdjson::SUCCESS);
    } else {
      for (const auto& in : r->inputs) {
        ASSERT_EQ(static_cast<int64_t>(in.byte_size),
                  ElementCount(in.shape) * static_cast<int64_t>(DataTypeSize(in.datatype)));
      }
    }
  }
}

}  // namespace
}  // namespace packrat
