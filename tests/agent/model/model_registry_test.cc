// The registry's answer for a model it does not serve, and the server's readiness: strict and
// lenient, during start-up, with a model that failed at start.
#include "agent/model/model_registry.h"

#include "agent/model/served_model.h"
#include "gtest/gtest.h"

namespace packrat {
namespace {

// A model never loaded: its state stays LOADING.
std::shared_ptr<ServedModel> Unloaded(const std::string& name) {
  ModelConfig m;
  m.name = name;
  m.path = "/nonexistent/" + name + ".pt";
  m.inputs = {{"x", DataType::kFp32, {-1, 4}}};
  m.outputs = {{"y", DataType::kFp32, {-1, 2}}};
  m.instances = {{1, 1, 1}};
  return std::make_shared<ServedModel>(std::move(m), ServedModelOptions{}, nullptr);
}

TEST(ModelRegistryTest, AModelInTransitionIsUnavailableNotUnknown) {
  ModelRegistry registry;
  EXPECT_EQ(registry.Absent("m").code(), StatusCode::kNotFound);
  registry.BeginTransition("m", "loading");
  const Status loading = registry.Absent("m");
  EXPECT_EQ(loading.code(), StatusCode::kUnavailable);
  EXPECT_EQ(loading.message(), "model 'm' is loading");
  registry.EndTransition("m");
  EXPECT_EQ(registry.Absent("m").code(), StatusCode::kNotFound);
  registry.FailedAtStart("m", "no model.yaml");
  EXPECT_EQ(registry.Absent("m").message(), "model 'm' failed to load at start: no model.yaml");
  registry.BeginTransition("m", "loading");
  registry.Put("m", Unloaded("m"));  // served: neither in transition nor failed any more
  registry.Remove("m");
  EXPECT_EQ(registry.Absent("m").code(), StatusCode::kNotFound);
}

TEST(ModelRegistryTest, ReadyOnlyAfterStartAndStrictlyOnlyWithEveryModelReady) {
  ModelRegistry registry;
  EXPECT_TRUE(registry.Ready());  // nothing asked for
  registry.set_starting(true);
  EXPECT_FALSE(registry.Ready());
  registry.set_starting(false);
  registry.FailedAtStart("broken", "cannot read 'x.pt'");
  EXPECT_FALSE(registry.Ready());
  registry.set_strict_readiness(false);
  EXPECT_TRUE(registry.Ready());  // lenient: the failure is the model's own
  registry.set_strict_readiness(true);
  registry.Put("broken", Unloaded("broken"));  // loaded again, but not ready
  EXPECT_FALSE(registry.Ready());
  registry.Remove("broken");
  EXPECT_TRUE(registry.Ready());
}

}  // namespace
}  // namespace packrat
