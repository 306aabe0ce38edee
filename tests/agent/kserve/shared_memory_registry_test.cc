#include "agent/kserve/shared_memory_registry.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/support/shm_object.h"
#include "tests/support/temp_dir.h"

namespace packrat {
namespace {

using testing::ShmObject;

TEST(SharedMemoryRegistryTest, ARegisteredRegionResolvesToTheObjectsBytes) {
  ShmObject object(3 * 4096);
  const uint64_t offset = 4096 + 100;  // not page-aligned: the mapping starts a page earlier
  std::memcpy(object.data() + offset + 8, "packrat!", 8);
  SharedMemoryRegistry registry;
  ASSERT_TRUE(registry.Register("in", object.key(), offset, 1000).ok());

  const auto regions = registry.Regions("");
  ASSERT_TRUE(regions.ok());
  ASSERT_EQ(regions->size(), 1u);
  EXPECT_EQ((*regions)[0].name, "in");
  EXPECT_EQ((*regions)[0].key, object.key());
  EXPECT_EQ((*regions)[0].offset, offset);
  EXPECT_EQ((*regions)[0].byte_size, 1000u);

  const auto span = registry.Resolve({"in", 8, 8}, "input 'x'");
  ASSERT_TRUE(span.ok()) << span.status().ToString();
  EXPECT_EQ(std::memcmp(span->data, "packrat!", 8), 0);
  std::memcpy(span->data, "written!", 8);  // writes reach the client's object
  EXPECT_EQ(std::memcmp(object.data() + offset + 8, "written!", 8), 0);
}

TEST(SharedMemoryRegistryTest, RefusesBadNamesKeysAndRanges) {
  ShmObject object(4096);
  SharedMemoryRegistry registry;
  auto code = [&](const std::string& name, const std::string& key, uint64_t offset, uint64_t size) {
    return registry.Register(name, key, offset, size).code();
  };
  EXPECT_EQ(code("", object.key(), 0, 16), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(std::string(256, 'r'), object.key(), 0, 16), StatusCode::kInvalidArgument);
  EXPECT_EQ(code("r", "", 0, 16), StatusCode::kInvalidArgument);
  EXPECT_EQ(code("r", "/", 0, 16), StatusCode::kInvalidArgument);
  EXPECT_EQ(code("r", "/a/b", 0, 16), StatusCode::kInvalidArgument);
  EXPECT_EQ(code("r", "/..", 0, 16), StatusCode::kInvalidArgument);
  EXPECT_EQ(code("r", "/packrat.1.abc.ring", 0, 16), StatusCode::kInvalidArgument);
  EXPECT_EQ(code("r", object.key(), 0, 0), StatusCode::kInvalidArgument);
  EXPECT_EQ(code("r", object.key(), 4000, 200), StatusCode::kInvalidArgument);
  EXPECT_EQ(code("r", object.key(), UINT64_MAX, 2), StatusCode::kInvalidArgument);
  EXPECT_EQ(code("r", "/pkrt-test-no-such-object", 0, 16), StatusCode::kNotFound);
  EXPECT_TRUE(registry.Regions("")->empty());

  ASSERT_EQ(code("r", object.key(), 0, 4096), StatusCode::kOk);
  EXPECT_EQ(code("r", object.key(), 0, 16), StatusCode::kAlreadyExists);
  // The key may be given without its leading '/', as shm_open takes it.
  EXPECT_EQ(code("s", object.key().substr(1), 16, 16), StatusCode::kOk);
}

TEST(SharedMemoryRegistryTest, TakesOnlyKeysWithinTheConfiguredPrefix) {
  ShmObject object(4096);
  SharedMemoryRegistry registry({.enabled = true, .key_prefix = "clients-", .dir = "/dev/shm"});
  const Status refused = registry.Register("r", object.key(), 0, 16);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("key_prefix"), std::string::npos) << refused.message();

  SharedMemoryRegistry off({.enabled = false, .key_prefix = "", .dir = "/dev/shm"});
  EXPECT_EQ(off.Register("r", object.key(), 0, 16).code(), StatusCode::kUnavailable);
}

// Clients' objects in another folder (their /dev/shm, mounted elsewhere in the agent's pod);
// a symbolic link planted there is not followed.
TEST(SharedMemoryRegistryTest, OpensObjectsInTheConfiguredFolder) {
  testing::TempDir dir("packrat-shm");
  std::ofstream(dir.path() + "/tensors") << std::string(4096, 'x');
  std::filesystem::create_symlink(dir.path() + "/tensors", dir.path() + "/link");
  SharedMemoryRegistry registry({.enabled = true, .key_prefix = "", .dir = dir.path()});
  ASSERT_TRUE(registry.Register("r", "/tensors", 0, 4096).ok());
  EXPECT_EQ(registry.Resolve({"r", 1, 4095}, "input 'x'")->data[0], 'x');
  EXPECT_EQ(registry.Register("l", "/link", 0, 16).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.Register("n", "/none", 0, 16).code(), StatusCode::kNotFound);
}

TEST(SharedMemoryRegistryTest, AReferenceMustLieWithinItsRegion) {
  ShmObject object(4096);
  SharedMemoryRegistry registry;
  ASSERT_TRUE(registry.Register("r", object.key(), 1024, 1024).ok());
  EXPECT_TRUE(registry.Resolve({"r", 1024, 0}, "input 'x'").ok());
  EXPECT_TRUE(registry.Resolve({"r", 24, 1000}, "input 'x'").ok());
  EXPECT_EQ(registry.Resolve({"r", 25, 1000}, "input 'x'").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.Resolve({"r", 2, UINT64_MAX}, "input 'x'").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.Resolve({"nope", 1, 0}, "input 'x'").status().code(),
            StatusCode::kInvalidArgument);
}

// A read of pages a client cut off would be SIGBUS: the registry checks the object first.
TEST(SharedMemoryRegistryTest, RefusesAnObjectThatShrankSinceItWasRegistered) {
  ShmObject object(8192);
  SharedMemoryRegistry registry;
  ASSERT_TRUE(registry.Register("r", object.key(), 4096, 4096).ok());
  object.Truncate(4096);
  const auto span = registry.Resolve({"r", 16, 0}, "input 'x'");
  EXPECT_EQ(span.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(span.status().message().find("shrank"), std::string::npos);
}

TEST(SharedMemoryRegistryTest, ARegionInUseCannotBeUnregistered) {
  ShmObject object(4096);
  SharedMemoryRegistry registry;
  ASSERT_TRUE(registry.Register("a", object.key(), 0, 1024).ok());
  ASSERT_TRUE(registry.Register("b", object.key(), 1024, 1024).ok());
  {
    const auto lease = registry.Resolve({"a", 16, 0}, "input 'x'");
    ASSERT_TRUE(lease.ok());
    EXPECT_EQ(registry.Unregister("a").code(), StatusCode::kAborted);
    EXPECT_EQ(registry.Unregister("").code(), StatusCode::kAborted);  // all or nothing
    EXPECT_EQ(registry.Regions("")->size(), 2u);
    EXPECT_TRUE(registry.Unregister("b").ok());
  }
  EXPECT_TRUE(registry.Unregister("a").ok());
  EXPECT_EQ(registry.Unregister("a").code(), StatusCode::kNotFound);
  EXPECT_EQ(registry.Regions("a").status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(registry.Register("c", object.key(), 0, 16).ok());
  EXPECT_TRUE(registry.Unregister("").ok());
  EXPECT_TRUE(registry.Regions("")->empty());
}

// A lease keeps the bytes mapped even when the registry itself is gone (agent shutdown).
TEST(SharedMemoryRegistryTest, ALeaseOutlivesTheRegistry) {
  ShmObject object(4096);
  object.data()[7] = 42;
  SharedMemorySpan span;
  {
    SharedMemoryRegistry registry;
    ASSERT_TRUE(registry.Register("r", object.key(), 0, 4096).ok());
    span = *registry.Resolve({"r", 8, 0}, "input 'x'");
  }
  EXPECT_EQ(span.data[7], 42);
}

}  // namespace
}  // namespace packrat
