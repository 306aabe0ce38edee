#include "agent/config/triton_model_config.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <string>

namespace packrat {
namespace {

ModelConfig Model(int64_t max_batch) {
  ModelConfig m;
  m.name = "bert";
  m.path = "/models/bert/model.pt";
  m.inputs = {{"ids", DataType::kInt64, {-1, 128}}, {"mask", DataType::kBf16, {-1}}};
  m.outputs = {{"logits", DataType::kFp32, {-1, 2}}};
  m.batching.max_batch = max_batch;
  m.batching.max_delay_us = 750;
  return m;
}

ModelSignature SignatureOf(const ModelConfig& m) {
  ModelSignature s;
  s.name = m.name;
  s.inputs = m.inputs;
  s.outputs = m.outputs;
  s.max_batch = m.batching.max_batch;
  return s;
}

TEST(TritonModelConfigTest, ABatchingModelListsDimsWithoutTheBatchDimAndItsServingPlan) {
  ModelConfig m = Model(32);
  m.auto_instances = true;
  m.batching.p99_target_ms = 250;
  const TritonModelConfig c = TritonConfigOf(m, SignatureOf(m), {{2, 4, 8}, {1, 1, 16}});
  EXPECT_EQ(c.max_batch_size, 32);
  ASSERT_EQ(c.input.size(), 2u);
  EXPECT_EQ(c.input[0].data_type, "TYPE_INT64");
  EXPECT_EQ(c.input[0].dims, (std::vector<int64_t>{128}));
  EXPECT_EQ(c.input[1].data_type, "TYPE_BF16");
  EXPECT_TRUE(c.input[1].dims.empty());  // [-1]: the batch dim only
  ASSERT_EQ(c.instance_group.size(), 2u);
  EXPECT_EQ(c.instance_group[0].name, "bert_t4_b8");
  EXPECT_EQ(c.instance_group[0].count, 2);
  EXPECT_EQ(c.preferred_batch_size, (std::vector<int32_t>{32}));  // 2·8 + 16
  EXPECT_EQ(c.max_queue_delay_microseconds, 750u);
  EXPECT_EQ(c.default_model_filename, "model.pt");
  EXPECT_EQ(c.parameters,
            (std::vector<std::pair<std::string, std::string>>{{"packrat.instances", "auto"},
                                                              {"packrat.max_inflight_batches", "2"},
                                                              {"packrat.p99_target_ms", "250"}}));
}

TEST(TritonModelConfigTest, AModelWithoutABatchLimitHasMaxBatchSizeZeroAndWholeShapes) {
  const ModelConfig m = Model(0);
  const TritonModelConfig c = TritonConfigOf(m, SignatureOf(m), {});
  EXPECT_EQ(c.max_batch_size, 0);
  EXPECT_EQ(c.input[0].dims, (std::vector<int64_t>{-1, 128}));
  EXPECT_TRUE(c.instance_group.empty());  // not loaded yet
  EXPECT_TRUE(c.preferred_batch_size.empty());
}

TEST(TritonModelConfigTest, TheJsonIsTritonsWithNumbersAndEnumNames) {
  const ModelConfig m = Model(32);
  const std::string json = TritonModelConfigJson(TritonConfigOf(m, SignatureOf(m), {{1, 2, 4}}));
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(json).get(doc), simdjson::SUCCESS) << json;
  EXPECT_EQ(std::string_view(doc["name"]), "bert");
  EXPECT_EQ(int64_t(doc["max_batch_size"]), 32);
  EXPECT_EQ(std::string_view(doc["input"].at(0)["data_type"]), "TYPE_INT64");
  EXPECT_EQ(int64_t(doc["input"].at(0)["dims"].at(0)), 128);
  EXPECT_EQ(std::string_view(doc["instance_group"].at(0)["kind"]), "KIND_CPU");
  EXPECT_EQ(int64_t(doc["instance_group"].at(0)["count"]), 1);
  EXPECT_EQ(int64_t(doc["dynamic_batching"]["max_queue_delay_microseconds"]), 750);
  EXPECT_EQ(int64_t(doc["dynamic_batching"]["preferred_batch_size"].at(0)), 4);
  EXPECT_EQ(std::string_view(doc["parameters"]["packrat.instances"]["string_value"]), "static");
}

}  // namespace
}  // namespace packrat
