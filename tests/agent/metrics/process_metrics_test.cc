#include "agent/metrics/process_metrics.h"

#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "agent/metrics/runtime_process_metrics.h"

namespace packrat::metrics {
namespace {

namespace fs = std::filesystem;

// A fake /proc tree in a temporary directory.
class ProcessMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/packrat_proc_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    fs::create_directories(root_ + "/self/fd");
  }
  void TearDown() override { fs::remove_all(root_); }

  void Write(const std::string& path, const std::string& text) {
    std::ofstream(root_ + "/" + path) << text;
  }
  void WriteAll() {
    // The command name holds spaces and parentheses, as a hostile one may.
    Write("self/stat",
          "4242 (packrat (a) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 150 0 0 20 0 4 0 5000 "
          "104857600 2560 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0\n");
    Write("stat", "cpu  1 2 3 4\nintr 5\nbtime 1700000000\nprocesses 9\n");
    Write("self/limits",
          "Limit                     Soft Limit           Hard Limit           Units     \n"
          "Max cpu time              unlimited            unlimited            seconds   \n"
          "Max open files            1024                 4096                 files     \n");
    for (const char* fd : {"0", "1", "2"}) Write(std::string("self/fd/") + fd, "");
  }

  std::string root_;
  const double ticks_ = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page_ = static_cast<double>(sysconf(_SC_PAGESIZE));
};

TEST_F(ProcessMetricsTest, ReadsEveryFieldFromProc) {
  WriteAll();
  const ProcessStats s = ReadProcessStats(root_);
  ASSERT_TRUE(s.cpu_seconds && s.resident_memory_bytes && s.virtual_memory_bytes && s.open_fds &&
              s.max_fds && s.start_time_seconds);
  EXPECT_DOUBLE_EQ(*s.cpu_seconds, 400 / ticks_);
  EXPECT_DOUBLE_EQ(*s.resident_memory_bytes, 2560 * page_);
  EXPECT_DOUBLE_EQ(*s.virtual_memory_bytes, 104857600);
  EXPECT_DOUBLE_EQ(*s.open_fds, 3);
  EXPECT_DOUBLE_EQ(*s.max_fds, 1024);
  EXPECT_DOUBLE_EQ(*s.start_time_seconds, 1700000000 + 5000 / ticks_);
}

TEST_F(ProcessMetricsTest, MissingFilesLeaveTheirMetricsOut) {
  fs::remove_all(root_ + "/self");
  const ProcessStats s = ReadProcessStats(root_);
  EXPECT_FALSE(s.cpu_seconds || s.resident_memory_bytes || s.virtual_memory_bytes || s.open_fds ||
               s.max_fds || s.start_time_seconds);

  EXPECT_TRUE(ProcessMetrics({root_}).Collect().empty());
}

TEST_F(ProcessMetricsTest, RendersAtScrapeTime) {
  WriteAll();
  const ProcessMetrics metrics({root_});
  auto render = [&] { return prometheus::TextSerializer().Serialize(metrics.Collect()); };
  std::string page = render();
  EXPECT_NE(page.find("# TYPE process_cpu_seconds_total counter\n"), std::string::npos) << page;
  EXPECT_NE(page.find("# TYPE process_resident_memory_bytes gauge\n"), std::string::npos);
  EXPECT_NE(page.find("\nprocess_open_fds 3\n"), std::string::npos) << page;
  EXPECT_NE(page.find("\nprocess_max_fds 1024\n"), std::string::npos) << page;
  EXPECT_NE(page.find("\nprocess_virtual_memory_bytes 104857600\n"), std::string::npos) << page;

  Write("self/fd/3", "");
  page = render();
  EXPECT_NE(page.find("\nprocess_open_fds 4\n"), std::string::npos) << page;
}

// Runtime processes: each listed pid's CPU time and memory, per model, read at every scrape; a
// pid that is gone is left out, and an unbound model's series go.
TEST_F(ProcessMetricsTest, RuntimeProcessesAreReadByPidAtEachScrape) {
  WriteAll();
  fs::create_directories(root_ + "/77");
  Write("77/stat",
        "77 (packrat-runtime) S 1 77 77 0 -1 0 0 0 0 0 30 10 0 0 20 0 4 0 5000 4096 100 0\n");
  RuntimeProcessMetrics runtimes(root_);
  std::vector<pid_t> pids = {77, 78};  // 78 has no files: gone
  CallbackHandle bound = runtimes.Bind("demo", [&pids] { return pids; });
  auto render = [&] { return prometheus::TextSerializer().Serialize(runtimes.Collect()); };
  std::string page = render();
  EXPECT_NE(page.find("# TYPE packrat_runtime_cpu_seconds_total counter\n"), std::string::npos);
  std::ostringstream cpu, rss;
  cpu << "\npackrat_runtime_cpu_seconds_total{model=\"demo\",pid=\"77\"} " << 40 / ticks_ << "\n";
  rss << "\npackrat_runtime_resident_memory_bytes{model=\"demo\",pid=\"77\"} " << 100 * page_
      << "\n";
  EXPECT_NE(page.find(cpu.str()), std::string::npos) << page;
  EXPECT_NE(page.find(rss.str()), std::string::npos) << page;
  EXPECT_EQ(page.find("pid=\"78\""), std::string::npos) << page;
  bound.Reset();
  EXPECT_TRUE(runtimes.Collect().empty());
  EXPECT_TRUE(RuntimeProcessMetrics("").Collect().empty());
}

TEST(ProcessMetricsRealProcTest, ReadsPlausibleValuesForThisProcess) {
  const ProcessStats s = ReadProcessStats("/proc");
  ASSERT_TRUE(s.cpu_seconds && s.resident_memory_bytes && s.virtual_memory_bytes && s.open_fds &&
              s.max_fds && s.start_time_seconds);
  EXPECT_GE(*s.cpu_seconds, 0);
  EXPECT_GT(*s.resident_memory_bytes, 1 << 20);
  EXPECT_GE(*s.virtual_memory_bytes, *s.resident_memory_bytes);
  EXPECT_GE(*s.open_fds, 3);
  EXPECT_GE(*s.max_fds, *s.open_fds);
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  // Started at most an hour ago (a test binary), and not in the future (clock-tick rounding).
  EXPECT_LE(*s.start_time_seconds, now + 1);
  EXPECT_GT(*s.start_time_seconds, now - 3600);
}

}  // namespace
}  // namespace packrat::metrics
