// ModelInfer messages <-> DecodedRequest and tensors (agent/grpc/infer_codec.h), and the
// Status -> gRPC code mapping (agent/grpc/grpc_status.h). Every request refused here is also
// sent to the REST decoder as JSON: both must refuse it with the same message.
#include "agent/grpc/infer_codec.h"

#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "agent/grpc/grpc_status.h"
#include "gtest/gtest.h"
#include "tests/support/shm_object.h"

namespace packrat {
namespace {

using inference::ModelInferRequest;
using inference::ModelInferResponse;

TEST(GrpcStatusTest, MapsEveryCodeAsTritonDoes) {
  const std::vector<std::pair<StatusCode, grpc::StatusCode>> cases = {
      {StatusCode::kOk, grpc::StatusCode::OK},
      {StatusCode::kInvalidArgument, grpc::StatusCode::INVALID_ARGUMENT},
      {StatusCode::kNotFound, grpc::StatusCode::NOT_FOUND},
      {StatusCode::kAlreadyExists, grpc::StatusCode::ALREADY_EXISTS},
      {StatusCode::kResourceExhausted, grpc::StatusCode::RESOURCE_EXHAUSTED},
      {StatusCode::kOutOfRange, grpc::StatusCode::OUT_OF_RANGE},
      {StatusCode::kFailedPrecondition, grpc::StatusCode::UNAVAILABLE},
      {StatusCode::kUnavailable, grpc::StatusCode::UNAVAILABLE},
      {StatusCode::kDeadlineExceeded, grpc::StatusCode::DEADLINE_EXCEEDED},
      {StatusCode::kInternal, grpc::StatusCode::INTERNAL},
      {StatusCode::kCancelled, grpc::StatusCode::CANCELLED},
      {StatusCode::kAborted, grpc::StatusCode::ABORTED},
  };
  for (const auto& [ours, theirs] : cases) {
    EXPECT_EQ(GrpcCodeFor(ours), theirs) << StatusCodeName(ours);
  }
  const grpc::Status s = ToGrpcStatus(ResourceExhausted("the model's queue is full"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(s.error_message(), "the model's queue is full");
  EXPECT_TRUE(ToGrpcStatus(Status::Ok()).ok());
}

// x: FP32 [-1, 4]; ids: INT64 [-1, 2]; outputs y FP32 [-1, 3], best INT64 [-1].
ModelSignature TwoInputs() {
  ModelSignature s;
  s.name = "m";
  s.inputs = {{"x", DataType::kFp32, {-1, 4}}, {"ids", DataType::kInt64, {-1, 2}}};
  s.outputs = {{"y", DataType::kFp32, {-1, 3}}, {"best", DataType::kInt64, {-1}}};
  s.max_batch = 4;
  return s;
}

template <typename T>
std::string Raw(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

ModelInferRequest::InferInputTensor* AddInput(ModelInferRequest* r, const std::string& name,
                                              const std::string& datatype,
                                              const std::vector<int64_t>& shape) {
  ModelInferRequest::InferInputTensor* in = r->add_inputs();
  in->set_name(name);
  in->set_datatype(datatype);
  for (int64_t d : shape) in->add_shape(d);
  return in;
}

// Two rows of both inputs, raw.
std::shared_ptr<ModelInferRequest> RawRequest() {
  auto r = std::make_shared<ModelInferRequest>();
  r->set_model_name("m");
  r->set_id("req-1");
  AddInput(r.get(), "x", "FP32", {2, 4});
  AddInput(r.get(), "ids", "INT64", {2, 2});
  r->add_raw_input_contents(Raw<float>({1, 2, 3, 4, 5, 6, 7, 8}));
  r->add_raw_input_contents(Raw<int64_t>({10, 11, 12, 13}));
  return r;
}

StatusOr<DecodedRequest> Decode(const ModelSignature& sig,
                                const std::shared_ptr<ModelInferRequest>& r) {
  return DecodeModelInferRequest(sig, *r, r);
}

TEST(GrpcInferCodecTest, RawInputsAreViewedInPlace) {
  const ModelSignature sig = TwoInputs();
  std::shared_ptr<ModelInferRequest> r = RawRequest();
  StatusOr<DecodedRequest> d = Decode(sig, r);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->id, "req-1");
  EXPECT_EQ(d->rows, 2);
  ASSERT_EQ(d->inputs.size(), 2u);
  EXPECT_EQ(d->inputs[0].name, "x");
  EXPECT_EQ(d->inputs[0].shape, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(d->inputs[0].byte_size, 32u);
  // No copy: the views point into the message, which the request keeps alive.
  EXPECT_EQ(reinterpret_cast<const char*>(d->inputs[0].data), r->raw_input_contents(0).data());
  EXPECT_EQ(reinterpret_cast<const char*>(d->inputs[1].data), r->raw_input_contents(1).data());
  EXPECT_EQ(d->keepalive.get(), r.get());
  EXPECT_TRUE(d->owned.empty());
  EXPECT_FALSE(d->timeout_us.has_value());
}

TEST(GrpcInferCodecTest, InputsMayComeInAnyOrder) {
  const ModelSignature sig = TwoInputs();
  auto r = std::make_shared<ModelInferRequest>();
  AddInput(r.get(), "ids", "INT64", {1, 2});
  AddInput(r.get(), "x", "FP32", {1, 4});
  r->add_raw_input_contents(Raw<int64_t>({7, 8}));
  r->add_raw_input_contents(Raw<float>({1, 2, 3, 4}));
  StatusOr<DecodedRequest> d = Decode(sig, r);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  // Signature order, each with its own entry.
  EXPECT_EQ(d->inputs[0].name, "x");
  EXPECT_EQ(d->inputs[0].byte_size, 16u);
  int64_t first_id = 0;
  std::memcpy(&first_id, d->inputs[1].data, sizeof(first_id));
  EXPECT_EQ(first_id, 7);
}

TEST(GrpcInferCodecTest, TypedContentsAreConverted) {
  const ModelSignature sig = TwoInputs();
  auto r = std::make_shared<ModelInferRequest>();
  AddInput(r.get(), "x", "FP32", {1, 4})->mutable_contents()->mutable_fp32_contents()->Add(1.5f);
  for (float f : {2.5f, 3.5f, 4.5f}) r->mutable_inputs(0)->mutable_contents()->add_fp32_contents(f);
  // Mixed: ids raw, x typed (KServe's client may send both kinds in one request).
  AddInput(r.get(), "ids", "INT64", {1, 2});
  r->add_raw_input_contents(Raw<int64_t>({3, 4}));
  StatusOr<DecodedRequest> d = Decode(sig, r);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  ASSERT_EQ(d->owned.size(), 1u);
  std::vector<float> x(4);
  std::memcpy(x.data(), d->inputs[0].data, 16);
  EXPECT_EQ(x, (std::vector<float>{1.5f, 2.5f, 3.5f, 4.5f}));
  EXPECT_EQ(reinterpret_cast<const char*>(d->inputs[1].data), r->raw_input_contents(0).data());
}

// One input of `type`, shape [1, n], with typed `fill`ed contents.
template <typename Fill>
StatusOr<DecodedRequest> DecodeTyped(DataType type, const std::string& type_name, int n,
                                     Fill fill) {
  ModelSignature sig;
  sig.name = "t";
  sig.inputs = {{"v", type, {-1, n}}};
  sig.outputs = {{"o", DataType::kFp32, {-1}}};
  auto r = std::make_shared<ModelInferRequest>();
  fill(AddInput(r.get(), "v", type_name, {1, n})->mutable_contents());
  return Decode(sig, r);
}

template <typename T>
std::vector<T> Values(const DecodedRequest& d) {
  std::vector<T> out(d.inputs[0].byte_size / sizeof(T));
  std::memcpy(out.data(), d.inputs[0].data, d.inputs[0].byte_size);
  return out;
}

TEST(GrpcInferCodecTest, EveryTypedMemberAndRangeCheck) {
  using inference::InferTensorContents;
  auto b = DecodeTyped(DataType::kBool, "BOOL", 2, [](InferTensorContents* c) {
    c->add_bool_contents(true);
    c->add_bool_contents(false);
  });
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(Values<uint8_t>(*b), (std::vector<uint8_t>{1, 0}));

  auto u8 = DecodeTyped(DataType::kUint8, "UINT8", 2, [](InferTensorContents* c) {
    c->add_uint_contents(0);
    c->add_uint_contents(255);
  });
  ASSERT_TRUE(u8.ok()) << u8.status().ToString();
  EXPECT_EQ(Values<uint8_t>(*u8), (std::vector<uint8_t>{0, 255}));
  auto u8_big = DecodeTyped(DataType::kUint8, "UINT8", 2, [](InferTensorContents* c) {
    c->add_uint_contents(1);
    c->add_uint_contents(256);
  });
  EXPECT_EQ(u8_big.status().message(), "input 'v': element 1 (256) is out of range for UINT8");

  auto i8 = DecodeTyped(DataType::kInt8, "INT8", 2, [](InferTensorContents* c) {
    c->add_int_contents(-128);
    c->add_int_contents(127);
  });
  ASSERT_TRUE(i8.ok());
  EXPECT_EQ(Values<int8_t>(*i8), (std::vector<int8_t>{-128, 127}));
  auto i16 = DecodeTyped(DataType::kInt16, "INT16", 1,
                         [](InferTensorContents* c) { c->add_int_contents(-40000); });
  EXPECT_EQ(i16.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(i16.status().message().find("out of range for INT16"), std::string::npos);
  auto i32 = DecodeTyped(DataType::kInt32, "INT32", 1, [](InferTensorContents* c) {
    c->add_int_contents(std::numeric_limits<int32_t>::min());
  });
  ASSERT_TRUE(i32.ok());
  EXPECT_EQ(Values<int32_t>(*i32)[0], std::numeric_limits<int32_t>::min());
  auto i64 = DecodeTyped(DataType::kInt64, "INT64", 1,
                         [](InferTensorContents* c) { c->add_int64_contents(int64_t{1} << 40); });
  ASSERT_TRUE(i64.ok());
  EXPECT_EQ(Values<int64_t>(*i64)[0], int64_t{1} << 40);
  auto f64 = DecodeTyped(DataType::kFp64, "FP64", 1,
                         [](InferTensorContents* c) { c->add_fp64_contents(0.1); });
  ASSERT_TRUE(f64.ok());
  EXPECT_EQ(Values<double>(*f64)[0], 0.1);

  auto fp16 = DecodeTyped(DataType::kFp16, "FP16", 1,
                          [](InferTensorContents* c) { c->add_fp32_contents(1); });
  EXPECT_EQ(fp16.status().message(),
            "input 'v': FP16 has no typed contents: send it in raw_input_contents");
  auto wrong_member = DecodeTyped(DataType::kFp32, "FP32", 1,
                                  [](InferTensorContents* c) { c->add_int_contents(1); });
  EXPECT_EQ(wrong_member.status().message(),
            "input 'v': contents of a FP32 tensor go in fp32_contents only");
  auto short_list = DecodeTyped(DataType::kFp32, "FP32", 3,
                                [](InferTensorContents* c) { c->add_fp32_contents(1); });
  EXPECT_EQ(short_list.status().message(),
            "input 'v': expected 3 values in contents.fp32_contents, got 1");
}

TEST(GrpcInferCodecTest, RawDataMustMatchTheShape) {
  const ModelSignature sig = TwoInputs();
  std::shared_ptr<ModelInferRequest> r = RawRequest();
  r->set_raw_input_contents(0, Raw<float>({1, 2, 3}));
  EXPECT_EQ(Decode(sig, r).status().message(),
            "input 'x': raw_input_contents[0] has 12 bytes but shape [2,4] of FP32 needs 32 bytes");

  r = RawRequest();
  r->mutable_raw_input_contents()->RemoveLast();
  EXPECT_EQ(Decode(sig, r).status().message(),
            "input 'ids': no data: neither typed contents nor a raw_input_contents entry");

  r = RawRequest();
  r->add_raw_input_contents("surplus");
  EXPECT_EQ(Decode(sig, r).status().message(),
            "3 raw_input_contents entries but 2 inputs without typed contents");
}

TEST(GrpcInferCodecTest, TimeoutParameterAndIgnoredParameters) {
  const ModelSignature sig = TwoInputs();
  std::shared_ptr<ModelInferRequest> r = RawRequest();
  (*r->mutable_parameters())["timeout"].set_int64_param(2500);
  (*r->mutable_parameters())["priority"].set_uint64_param(3);  // tritonclient; ignored
  (*r->mutable_inputs(0)->mutable_parameters())["binary_data_size"].set_int64_param(32);  // KServe
  StatusOr<DecodedRequest> d = Decode(sig, r);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->timeout_us, 2500u);

  (*r->mutable_parameters())["timeout"].set_uint64_param(7);
  EXPECT_EQ(Decode(sig, r)->timeout_us, 7u);
  (*r->mutable_parameters())["timeout"].set_int64_param(0);  // none, as REST's 0
  EXPECT_FALSE(Decode(sig, r)->timeout_us.has_value());
  for (auto set : std::vector<void (*)(inference::InferParameter*)>{
           [](inference::InferParameter* p) { p->set_int64_param(-1); },
           [](inference::InferParameter* p) { p->set_string_param("1s"); },
           [](inference::InferParameter* p) { p->set_double_param(1.5); }}) {
    set(&(*r->mutable_parameters())["timeout"]);
    EXPECT_EQ(Decode(sig, r).status().message(),
              "parameter 'timeout' must be a non-negative integer (microseconds)");
  }
  (*r->mutable_parameters())["timeout"].set_uint64_param(86'400'000'001);
  EXPECT_NE(Decode(sig, r).status().message().find("at most 86400000000 microseconds"),
            std::string::npos);
}

TEST(GrpcInferCodecTest, RequestedOutputs) {
  const ModelSignature sig = TwoInputs();
  std::shared_ptr<ModelInferRequest> r = RawRequest();
  r->add_outputs()->set_name("best");
  StatusOr<DecodedRequest> d = Decode(sig, r);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  ASSERT_EQ(d->outputs.size(), 1u);
  EXPECT_EQ(d->outputs[0].name, "best");

  (*r->mutable_outputs(0)->mutable_parameters())["classification"].set_int64_param(3);
  EXPECT_EQ(Decode(sig, r).status().message(),
            "output 'best': parameter 'classification' is not supported");
}

// A JSON input of the REST protocol with the same declaration.
std::string JsonInput(const std::string& name, const std::string& datatype,
                      const std::string& shape, const std::string& data) {
  return "{\"name\":\"" + name + "\",\"datatype\":\"" + datatype + "\",\"shape\":" + shape +
         ",\"data\":" + data + "}";
}

// Each case: a change to the raw two-row request and the same request as REST JSON. Both
// decoders must refuse it with the same message.
TEST(GrpcInferCodecTest, RefusesWhatRestRefusesWithTheSameMessage) {
  const ModelSignature sig = TwoInputs();
  const std::string x2 = JsonInput("x", "FP32", "[2,4]", "[1,2,3,4,5,6,7,8]");
  const std::string ids2 = JsonInput("ids", "INT64", "[2,2]", "[10,11,12,13]");
  struct Case {
    std::string what;
    std::function<void(ModelInferRequest*)> change;
    std::string json;
    std::string message;  // what both must say
  };
  const std::vector<Case> cases = {
      {"unknown input", [](ModelInferRequest* r) { r->mutable_inputs(1)->set_name("zz"); },
       "{\"inputs\":[" + x2 + "," + JsonInput("zz", "INT64", "[2,2]", "[1,2,3,4]") + "]}",
       "unknown input 'zz' (model 'm' has inputs: x, ids)"},
      {"wrong datatype", [](ModelInferRequest* r) { r->mutable_inputs(1)->set_datatype("INT32"); },
       "{\"inputs\":[" + x2 + "," + JsonInput("ids", "INT32", "[2,2]", "[1,2,3,4]") + "]}",
       "input 'ids': expected datatype INT64, got INT32"},
      {"unsupported datatype",
       [](ModelInferRequest* r) { r->mutable_inputs(1)->set_datatype("BYTES"); },
       "{\"inputs\":[" + x2 + "," + JsonInput("ids", "BYTES", "[2,2]", "[1,2,3,4]") + "]}",
       "input 'ids': unsupported datatype 'BYTES'"},
      {"wrong rank", [](ModelInferRequest* r) { r->mutable_inputs(0)->add_shape(1); },
       "{\"inputs\":[" + JsonInput("x", "FP32", "[2,4,1]", "[1,2,3,4,5,6,7,8]") + "," + ids2 + "]}",
       "input 'x': expected rank 2 (shape [-1,4]), got rank 3 (shape [2,4,1])"},
      {"wrong fixed dim",
       [](ModelInferRequest* r) {
         r->mutable_inputs(0)->set_shape(0, 4);
         r->mutable_inputs(0)->set_shape(1, 2);
       },
       "{\"inputs\":[" + JsonInput("x", "FP32", "[4,2]", "[1,2,3,4,5,6,7,8]") + "," + ids2 + "]}",
       "input 'x': dimension 1 must be 4 (declared shape [-1,4]), got shape [4,2]"},
      {"negative dim", [](ModelInferRequest* r) { r->mutable_inputs(0)->set_shape(0, -2); },
       "{\"inputs\":[" + JsonInput("x", "FP32", "[-2,4]", "[1,2,3,4,5,6,7,8]") + "," + ids2 + "]}",
       "input 'x': negative dimension -2 in shape"},
      {"missing input",
       [](ModelInferRequest* r) {
         r->mutable_inputs()->RemoveLast();
         r->mutable_raw_input_contents()->RemoveLast();
       },
       "{\"inputs\":[" + x2 + "]}", "missing input 'ids'"},
      {"input twice",
       [](ModelInferRequest* r) {
         *r->add_inputs() = r->inputs(0);
         r->add_raw_input_contents(r->raw_input_contents(0));
       },
       "{\"inputs\":[" + x2 + "," + ids2 + "," + x2 + "]}", "input 'x' given more than once"},
      {"rows disagree",
       [](ModelInferRequest* r) {
         r->mutable_inputs(1)->set_shape(0, 1);
         r->set_raw_input_contents(1, Raw<int64_t>({1, 2}));
       },
       "{\"inputs\":[" + x2 + "," + JsonInput("ids", "INT64", "[1,2]", "[1,2]") + "]}",
       "input 'ids' has 1 rows but input 'x' has 2"},
      {"unknown output", [](ModelInferRequest* r) { r->add_outputs()->set_name("nope"); },
       "{\"outputs\":[{\"name\":\"nope\"}],\"inputs\":[" + x2 + "," + ids2 + "]}",
       "unknown output 'nope' requested (model 'm' has outputs: y, best)"},
      {"output twice",
       [](ModelInferRequest* r) {
         r->add_outputs()->set_name("y");
         r->add_outputs()->set_name("y");
       },
       "{\"outputs\":[{\"name\":\"y\"},{\"name\":\"y\"}],\"inputs\":[" + x2 + "," + ids2 + "]}",
       "output 'y' requested more than once"},
  };
  for (const Case& c : cases) {
    std::shared_ptr<ModelInferRequest> r = RawRequest();
    c.change(r.get());
    StatusOr<DecodedRequest> grpc = Decode(sig, r);
    StatusOr<DecodedRequest> rest =
        DecodeInferRequest(sig, std::make_shared<const std::string>(c.json), std::nullopt);
    ASSERT_FALSE(grpc.ok()) << c.what;
    ASSERT_FALSE(rest.ok()) << c.what;
    EXPECT_EQ(grpc.status().code(), StatusCode::kInvalidArgument) << c.what;
    EXPECT_EQ(grpc.status().message(), rest.status().message()) << c.what;
    EXPECT_NE(grpc.status().message().find(c.message), std::string::npos)
        << c.what << ": " << grpc.status().message();
  }

  // max_batch: five rows of a model that takes four.
  std::shared_ptr<ModelInferRequest> r = RawRequest();
  r->mutable_inputs(0)->set_shape(0, 5);
  r->set_raw_input_contents(0, std::string(5 * 16, '\0'));
  r->mutable_inputs(1)->set_shape(0, 5);
  r->set_raw_input_contents(1, std::string(5 * 16, '\0'));
  const std::string zeros = [] {
    std::string s = "[0";
    for (int i = 1; i < 20; ++i) s += ",0";
    return s + "]";
  }();
  const std::string ids_zeros = "[0,0,0,0,0,0,0,0,0,0]";
  const std::string json = "{\"inputs\":[" + JsonInput("x", "FP32", "[5,4]", zeros) + "," +
                           JsonInput("ids", "INT64", "[5,2]", ids_zeros) + "]}";
  StatusOr<DecodedRequest> grpc = Decode(sig, r);
  StatusOr<DecodedRequest> rest =
      DecodeInferRequest(sig, std::make_shared<const std::string>(json), std::nullopt);
  ASSERT_FALSE(grpc.ok());
  ASSERT_FALSE(rest.ok());
  EXPECT_EQ(grpc.status().message(), rest.status().message());
  EXPECT_EQ(grpc.status().message(), "batch of 5 rows exceeds max_batch 4 of model 'm'");
}

std::vector<Tensor> Outputs() {
  Tensor y{"y", DataType::kFp32, {2, 3}, {}};
  const std::vector<float> yv = {1, 2, 3, 4, 5, 6};
  y.bytes.assign(reinterpret_cast<const uint8_t*>(yv.data()),
                 reinterpret_cast<const uint8_t*>(yv.data()) + 24);
  Tensor best{"best", DataType::kInt64, {2}, {}};
  const std::vector<int64_t> bv = {2, 0};
  best.bytes.assign(reinterpret_cast<const uint8_t*>(bv.data()),
                    reinterpret_cast<const uint8_t*>(bv.data()) + 16);
  return {y, best};
}

TEST(GrpcInferCodecTest, EncodesEveryOutputRaw) {
  const ModelSignature sig = TwoInputs();
  DecodedRequest request;
  request.id = "abc";
  ModelInferResponse response;
  ASSERT_TRUE(EncodeModelInferResponse(sig, request, Outputs(), &response).ok());
  EXPECT_EQ(response.model_name(), "m");
  EXPECT_EQ(response.model_version(), "1");
  EXPECT_EQ(response.id(), "abc");
  ASSERT_EQ(response.outputs_size(), 2);
  ASSERT_EQ(response.raw_output_contents_size(), 2);  // one per output, always
  EXPECT_EQ(response.outputs(0).name(), "y");
  EXPECT_EQ(response.outputs(0).datatype(), "FP32");
  EXPECT_EQ(
      std::vector<int64_t>(response.outputs(0).shape().begin(), response.outputs(0).shape().end()),
      (std::vector<int64_t>{2, 3}));
  EXPECT_FALSE(response.outputs(0).has_contents());
  EXPECT_EQ(response.raw_output_contents(0), Raw<float>({1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(response.outputs(1).datatype(), "INT64");
  EXPECT_EQ(response.raw_output_contents(1), Raw<int64_t>({2, 0}));
}

TEST(GrpcInferCodecTest, EncodesRequestedOutputsInTheOrderAsked) {
  const ModelSignature sig = TwoInputs();
  DecodedRequest request;
  request.outputs = {{"best", false, std::nullopt}};
  ModelInferResponse response;
  ASSERT_TRUE(EncodeModelInferResponse(sig, request, Outputs(), &response).ok());
  ASSERT_EQ(response.outputs_size(), 1);
  EXPECT_EQ(response.outputs(0).name(), "best");
  EXPECT_EQ(response.raw_output_contents(0), Raw<int64_t>({2, 0}));
  EXPECT_TRUE(response.id().empty());

  std::vector<Tensor> broken = Outputs();
  broken[1].bytes.pop_back();
  ModelInferResponse again;
  const Status s = EncodeModelInferResponse(sig, request, broken, &again);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  request.outputs = {{"y", false, std::nullopt}};
  broken.erase(broken.begin());
  EXPECT_EQ(EncodeModelInferResponse(sig, request, broken, &again).code(), StatusCode::kInternal);
}

// The system shared-memory extension over gRPC: an input in a region takes no raw entry; an
// output written into a region keeps an empty raw entry beside its `outputs` entry.
TEST(GrpcInferCodecTest, InputsAndOutputsInSharedMemory) {
  const ModelSignature sig = TwoInputs();
  testing::ShmObject object(4096);
  SharedMemoryRegistry regions;
  ASSERT_TRUE(regions.Register("r", object.key(), 0, 4096).ok());
  const std::string x = Raw<float>({1, 2, 3, 4, 5, 6, 7, 8});
  std::memcpy(object.data() + 64, x.data(), x.size());

  auto request = std::make_shared<ModelInferRequest>();
  auto* in = AddInput(request.get(), "x", "FP32", {2, 4});
  (*in->mutable_parameters())["shared_memory_region"].set_string_param("r");
  (*in->mutable_parameters())["shared_memory_byte_size"].set_int64_param(32);
  (*in->mutable_parameters())["shared_memory_offset"].set_int64_param(64);
  AddInput(request.get(), "ids", "INT64", {2, 2});
  request->add_raw_input_contents(Raw<int64_t>({10, 11, 12, 13}));  // the only raw entry: ids
  auto* out = request->add_outputs();
  out->set_name("y");
  (*out->mutable_parameters())["shared_memory_region"].set_string_param("r");
  (*out->mutable_parameters())["shared_memory_byte_size"].set_uint64_param(1024);
  (*out->mutable_parameters())["shared_memory_offset"].set_int64_param(2048);
  request->add_outputs()->set_name("best");

  StatusOr<DecodedRequest> decoded = DecodeModelInferRequest(sig, *request, request, &regions);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  ASSERT_EQ(decoded->input_regions.size(), 1u);
  EXPECT_EQ(decoded->inputs[0].data, decoded->input_regions[0].data);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(decoded->inputs[0].data), 32), x);
  EXPECT_EQ(regions.Unregister("r").code(), StatusCode::kAborted);

  ModelInferResponse response;
  ASSERT_TRUE(EncodeModelInferResponse(sig, *decoded, Outputs(), &response).ok());
  ASSERT_EQ(response.outputs_size(), 2);
  ASSERT_EQ(response.raw_output_contents_size(), 2);
  EXPECT_TRUE(response.raw_output_contents(0).empty());
  const auto& params = response.outputs(0).parameters();
  EXPECT_EQ(params.at("shared_memory_region").string_param(), "r");
  EXPECT_EQ(params.at("shared_memory_byte_size").int64_param(), 24);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(object.data() + 2048), 24),
            Raw<float>({1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(response.raw_output_contents(1), Raw<int64_t>({2, 0}));

  // Refused as REST refuses them.
  (*in->mutable_parameters())["shared_memory_byte_size"].set_int64_param(16);
  EXPECT_EQ(DecodeModelInferRequest(sig, *request, request, &regions).status().code(),
            StatusCode::kInvalidArgument);
  in->mutable_parameters()->erase("shared_memory_region");
  const Status orphan = DecodeModelInferRequest(sig, *request, request, &regions).status();
  EXPECT_NE(orphan.message().find("needs 'shared_memory_region'"), std::string::npos)
      << orphan.ToString();
  EXPECT_EQ(DecodeModelInferRequest(sig, *RawRequest(), nullptr, nullptr).status().code(),
            StatusCode::kOk);
}

}  // namespace
}  // namespace packrat
