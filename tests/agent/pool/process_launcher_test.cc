#include "agent/pool/process_launcher.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <set>
#include <string>

#include "gtest/gtest.h"
#include "tests/support/temp_dir.h"

namespace packrat {
namespace {

// A descriptor the agent holds without O_CLOEXEC (Boost.Asio accepts sockets so) does not
// reach a launched process: a runtime holding a copy of a client's socket would keep it open
// after the agent closed it.
TEST(ForkExecLauncherTest, TheChildInheritsNoDescriptorOfTheAgentBeyondTheStandardOnes) {
  int pair[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);  // no SOCK_CLOEXEC
  const int file = open("/dev/null", O_RDONLY);             // nor O_CLOEXEC
  ASSERT_GE(file, 0);
  testing::TempDir dir("launcher-test");
  const std::string listing = dir.path() + "/fds";
  ForkExecLauncher launcher;
  LaunchSpec spec;
  spec.path = "/bin/sh";
  spec.args = {"-c", "ls /proc/$$/fd > " + listing};
  auto pid = launcher.Launch(spec);
  ASSERT_TRUE(pid.ok()) << pid.status().message();
  ASSERT_TRUE(launcher.Wait(*pid, std::chrono::seconds(30)));
  std::ifstream in(listing);
  std::set<int> fds;
  for (int fd; in >> fd;) fds.insert(fd);
  ASSERT_TRUE(fds.count(0) && fds.count(1) && fds.count(2));
  // The shell's own redirection may hold one more descriptor; none of the three above.
  for (int inherited : {pair[0], pair[1], file}) {
    EXPECT_EQ(fds.count(inherited), 0u) << "descriptor " << inherited << " crossed exec";
  }
  close(pair[0]);
  close(pair[1]);
  close(file);
}

}  // namespace
}  // namespace packrat
