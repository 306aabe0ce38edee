#include "agent/pool/virtual_node.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "agent/pool/resource_allocator.h"
#include "tests/support/temp_dir.h"

namespace packrat {
namespace {

Config VirtualConfig(int cpus, int per_socket, bool emulated) {
  Config config;
  config.server.virtual_cpus = cpus;
  config.server.virtual_cpus_per_socket = per_socket;
  ModelConfig m;
  m.emulate.enabled = emulated;
  config.models.push_back(m);
  return config;
}

TEST(VirtualNodeTest, TopologyIsSocketsOfCoresWithoutSmt) {
  const CpuTopology one = VirtualNode::Topology(16, 0);
  EXPECT_EQ(one.Describe(), "1 socket(s), 16 core(s), 16 CPU(s) [0-15]");
  const CpuTopology two = VirtualNode::Topology(64, 32);
  EXPECT_EQ(two.Describe(), "2 socket(s), 64 core(s), 64 CPU(s) [0-63]");
  EXPECT_EQ(two.Find(31)->socket, 0);
  EXPECT_EQ(two.Find(32)->socket, 1);
  EXPECT_EQ(two.Find(32)->core, 0);
  EXPECT_EQ(two.Find(40)->node, 1);
}

// The allocator plans over the virtual CPUs by its usual rules: one socket per instance.
TEST(VirtualNodeTest, TheAllocatorPlacesInstancesOnTheVirtualSockets) {
  ResourceAllocator allocator(VirtualNode::Topology(64, 32), 64);
  auto placements = allocator.Place({16, 16, 16, 16}, {});
  ASSERT_TRUE(placements.ok()) << placements.status().ToString();
  for (const Placement& p : *placements) {
    ASSERT_EQ(p.cpus.size(), 16u);
    EXPECT_EQ(p.cpus.front() / 32, p.cpus.back() / 32);  // within one socket
    EXPECT_EQ(p.mems, std::vector<int>{p.cpus.front() / 32});
  }
  EXPECT_EQ(allocator.Place({33, 32}, {}).status().code(), StatusCode::kResourceExhausted);
}

TEST(VirtualNodeTest, MakesItsSharedStateAndRemovesIt) {
  auto node = VirtualNode::Create(VirtualConfig(24, 0, true), {0, 1});
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  ASSERT_NE(*node, nullptr);
  EXPECT_TRUE((*node)->is_virtual());
  EXPECT_EQ((*node)->topology().cpus().size(), 24u);
  const std::string state = (*node)->state_name();
  std::string prefix = "packrat.";
  prefix += std::to_string(getpid());
  EXPECT_EQ(state.rfind(prefix, 0), 0u) << state;
  auto opened = shm::VirtualCpus::Open(state);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EXPECT_EQ((*opened)->num_cpus(), 24);

  ModelConfig m;
  m.emulate.enabled = true;
  ResolveEmulation(node->get(), &m);
  EXPECT_TRUE(m.emulate.virtual_node);
  EXPECT_EQ(m.emulate.node_state, state);

  node->reset();
  EXPECT_FALSE(std::filesystem::exists("/dev/shm/" + state));
}

TEST(VirtualNodeTest, EmulatedModelsOnARealNodeShareStateOverItsCpuIds) {
  auto node = VirtualNode::Create(VirtualConfig(0, 0, true), {0, 1, 5});
  ASSERT_TRUE(node.ok());
  ASSERT_NE(*node, nullptr);
  EXPECT_FALSE((*node)->is_virtual());
  EXPECT_EQ(shm::VirtualCpus::Open((*node)->state_name()).value()->num_cpus(), 6);
  ModelConfig m;
  ResolveEmulation(node->get(), &m);
  EXPECT_FALSE(m.emulate.virtual_node);
  // A real node without emulated models makes nothing.
  auto none = VirtualNode::Create(VirtualConfig(0, 0, false), {0, 1});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, nullptr);
  ResolveEmulation(nullptr, &m);
  EXPECT_TRUE(m.emulate.node_state.empty());
}

TEST(VirtualNodeTest, ARealModelOnAVirtualNodeCannotStart) {
  ModelConfig m;
  m.name = "real";
  EXPECT_TRUE(CheckEmulated(m).ok());
  m.emulate.virtual_node = true;
  EXPECT_EQ(CheckEmulated(m).code(), StatusCode::kFailedPrecondition);
  m.emulate.enabled = true;
  EXPECT_TRUE(CheckEmulated(m).ok());
}

TEST(VirtualNodeTest, ChecksTheRuntimesTheModelsNeed) {
  testing::TempDir dir("virtual-node-test");
  const std::string runtime = dir.path() + "/packrat-runtime";
  EXPECT_EQ(EmulatedRuntimePath(runtime), dir.path() + "/packrat-emulated-runtime");
  auto make = [](const std::string& path) {
    std::ofstream(path) << "#!/bin/sh\n";
    chmod(path.c_str(), 0755);
  };
  const Config real = VirtualConfig(0, 0, false);
  const Config virtual_node = VirtualConfig(8, 0, true);
  EXPECT_EQ(CheckRuntimes(real, runtime).code(), StatusCode::kNotFound);
  EXPECT_EQ(CheckRuntimes(virtual_node, runtime).code(), StatusCode::kNotFound);
  make(EmulatedRuntimePath(runtime));
  EXPECT_TRUE(CheckRuntimes(virtual_node, runtime).ok());  // no packrat-runtime needed
  EXPECT_EQ(CheckRuntimes(real, runtime).code(), StatusCode::kNotFound);
  make(runtime);
  EXPECT_TRUE(CheckRuntimes(real, runtime).ok());
  EXPECT_TRUE(CheckRuntimes(VirtualConfig(0, 0, true), runtime).ok());
}

}  // namespace
}  // namespace packrat
