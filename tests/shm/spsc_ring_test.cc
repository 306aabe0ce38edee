#include "shm/spsc_ring.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <future>
#include <optional>
#include <thread>

#include "shm/layout.h"
#include "tests/shm/child_process.h"

namespace packrat::shm {
namespace {

using namespace std::chrono_literals;

// An entry whose payload can be checked against its sequence number.
struct Entry {
  uint64_t seq;
  uint64_t check;
  char pad[48];
};
static_assert(sizeof(Entry) == 64);

uint64_t CheckFor(uint64_t seq) { return seq * 0x9e3779b97f4a7c15ull ^ 0x5a5a5a5a5a5a5a5aull; }

Entry MakeEntry(uint64_t seq) {
  Entry e{};
  e.seq = seq;
  e.check = CheckFor(seq);
  for (size_t i = 0; i < sizeof(e.pad); ++i) e.pad[i] = static_cast<char>(seq + i);
  return e;
}

bool EntryIsValid(const Entry& e, uint64_t expected_seq) {
  if (e.seq != expected_seq || e.check != CheckFor(expected_seq)) return false;
  for (size_t i = 0; i < sizeof(e.pad); ++i) {
    if (e.pad[i] != static_cast<char>(expected_seq + i)) return false;
  }
  return true;
}

// Memory shared with forked children: an anonymous MAP_SHARED mapping, page (so kAlign) aligned.
class SharedMapping {
 public:
  explicit SharedMapping(size_t bytes) : bytes_(bytes) {
    memory_ = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  }
  ~SharedMapping() {
    if (memory_ != MAP_FAILED) munmap(memory_, bytes_);
  }
  SharedMapping(const SharedMapping&) = delete;
  SharedMapping& operator=(const SharedMapping&) = delete;

  bool ok() const { return memory_ != MAP_FAILED; }
  void* get() const { return memory_; }
  size_t size() const { return bytes_; }

 private:
  size_t bytes_;
  void* memory_;
};

class SpscRingTest : public ::testing::Test {
 protected:
  static constexpr uint32_t kCapacity = 8;

  SpscRingTest() : memory_(SpscRing<Entry>::BytesFor(kCapacity)) {}

  void SetUp() override {
    ASSERT_TRUE(memory_.ok());
    ring_.emplace(SpscRing<Entry>::Initialize(memory_.get(), kCapacity));
  }

  RingHeader* header() { return static_cast<RingHeader*>(memory_.get()); }
  SpscRing<Entry>& ring() { return *ring_; }

  SharedMapping memory_;
  std::optional<SpscRing<Entry>> ring_;
};

TEST_F(SpscRingTest, BytesForCoversHeaderAndEntries) {
  EXPECT_EQ(SpscRing<Entry>::BytesFor(8), sizeof(RingHeader) + 8 * sizeof(Entry));
  EXPECT_EQ(SpscRing<Entry>::BytesFor(1) % kAlign, 0u);
  EXPECT_EQ(SpscRing<uint32_t>::BytesFor(3), sizeof(RingHeader) + kAlign);
}

TEST_F(SpscRingTest, StartsEmpty) {
  EXPECT_EQ(ring().capacity(), kCapacity);
  EXPECT_EQ(ring().size(), 0u);
  EXPECT_FALSE(ring().closed());
}

TEST_F(SpscRingTest, TryPopFailsWhenEmpty) {
  Entry e = MakeEntry(99);
  EXPECT_FALSE(ring().TryPop(&e));
  EXPECT_EQ(e.seq, 99u);  // untouched
  ASSERT_TRUE(ring().TryPush(MakeEntry(1)));
  ASSERT_TRUE(ring().TryPop(&e));
  EXPECT_FALSE(ring().TryPop(&e));
}

TEST_F(SpscRingTest, TryPushFailsWhenFull) {
  for (uint64_t i = 0; i < kCapacity; ++i) ASSERT_TRUE(ring().TryPush(MakeEntry(i)));
  EXPECT_EQ(ring().size(), kCapacity);
  EXPECT_FALSE(ring().TryPush(MakeEntry(kCapacity)));
  EXPECT_EQ(ring().size(), kCapacity);
  // One pop makes exactly one slot; the rejected entry was not stored.
  Entry e;
  ASSERT_TRUE(ring().TryPop(&e));
  EXPECT_TRUE(EntryIsValid(e, 0));
  EXPECT_TRUE(ring().TryPush(MakeEntry(100)));
  EXPECT_FALSE(ring().TryPush(MakeEntry(101)));
  for (uint64_t i = 1; i < kCapacity; ++i) {
    ASSERT_TRUE(ring().TryPop(&e));
    EXPECT_TRUE(EntryIsValid(e, i));
  }
  ASSERT_TRUE(ring().TryPop(&e));
  EXPECT_TRUE(EntryIsValid(e, 100));
}

TEST_F(SpscRingTest, WrapsAroundManyTimesInOrder) {
  // Chunks of every size 1..capacity, so head and tail cross the end of the array at every
  // possible phase, over ~1000 laps.
  uint64_t pushed = 0;
  uint64_t popped = 0;
  Entry e;
  for (int lap = 0; lap < 1000; ++lap) {
    const uint32_t chunk = 1 + static_cast<uint32_t>(lap % kCapacity);
    for (uint32_t i = 0; i < chunk; ++i) ASSERT_TRUE(ring().TryPush(MakeEntry(pushed++)));
    ASSERT_EQ(ring().size(), chunk);
    for (uint32_t i = 0; i < chunk; ++i) {
      ASSERT_TRUE(ring().TryPop(&e));
      ASSERT_TRUE(EntryIsValid(e, popped++)) << "at entry " << popped - 1;
    }
    ASSERT_FALSE(ring().TryPop(&e));
  }
  EXPECT_EQ(header()->head.load(), pushed);
  EXPECT_EQ(header()->tail.load(), popped);
  EXPECT_GT(pushed, 100u * kCapacity);
}

TEST_F(SpscRingTest, WrapsAroundWithPartialFill) {
  // Keeps between 3 and capacity entries queued while cycling, so wrapped reads happen with
  // the ring neither empty nor full.
  uint64_t pushed = 0;
  uint64_t popped = 0;
  Entry e;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(ring().TryPush(MakeEntry(pushed++)));
  for (int step = 0; step < 10000; ++step) {
    while (ring().TryPush(MakeEntry(pushed))) ++pushed;
    ASSERT_EQ(ring().size(), kCapacity);
    const int pops = 1 + step % 5;
    for (int i = 0; i < pops; ++i) {
      ASSERT_TRUE(ring().TryPop(&e));
      ASSERT_TRUE(EntryIsValid(e, popped++));
    }
  }
  while (ring().TryPop(&e)) ASSERT_TRUE(EntryIsValid(e, popped++));
  EXPECT_EQ(popped, pushed);
}

TEST_F(SpscRingTest, PopTimesOutWhenEmpty) {
  Entry e;
  const auto start = std::chrono::steady_clock::now();
  const Status s = ring().Pop(&e, 20ms);
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s.ToString();
  EXPECT_GE(std::chrono::steady_clock::now() - start, 20ms);
  EXPECT_EQ(header()->consumer_waiting.load(), 0u);
}

TEST_F(SpscRingTest, PushTimesOutWhenFull) {
  for (uint64_t i = 0; i < kCapacity; ++i) ASSERT_TRUE(ring().TryPush(MakeEntry(i)));
  ring().set_spin_iterations(0);
  const auto start = std::chrono::steady_clock::now();
  const Status s = ring().Push(MakeEntry(kCapacity), 20ms);
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s.ToString();
  EXPECT_GE(std::chrono::steady_clock::now() - start, 20ms);
  EXPECT_EQ(ring().size(), kCapacity);
}

TEST_F(SpscRingTest, ZeroTimeoutStillTakesAnAvailableEntry) {
  ring().set_spin_iterations(0);
  ASSERT_TRUE(ring().TryPush(MakeEntry(7)));
  Entry e;
  ASSERT_TRUE(ring().Pop(&e, 0ns).ok());
  EXPECT_TRUE(EntryIsValid(e, 7));
  EXPECT_EQ(ring().Pop(&e, 0ns).code(), StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(ring().Push(MakeEntry(8), 0ns).ok());
}

TEST_F(SpscRingTest, BlockedPopWakesOnPushFromAnotherThread) {
  ring().set_spin_iterations(0);
  auto popped = std::async(std::launch::async, [this] {
    Entry e{};
    const Status s = ring().Pop(&e, 10s);
    return std::make_pair(s, e);
  });
  // Push only once the consumer announced its futex sleep, so the wake-up path is what runs.
  ASSERT_TRUE(YieldUntil([&] { return header()->consumer_waiting.load() != 0; }));
  ASSERT_TRUE(ring().Push(MakeEntry(42), 1s).ok());
  ASSERT_EQ(popped.wait_for(5s), std::future_status::ready);
  const auto [status, entry] = popped.get();
  EXPECT_TRUE(status.ok()) << status.ToString();
  EXPECT_TRUE(EntryIsValid(entry, 42));
}

TEST_F(SpscRingTest, BlockedPushWakesOnPopFromAnotherThread) {
  ring().set_spin_iterations(0);
  for (uint64_t i = 0; i < kCapacity; ++i) ASSERT_TRUE(ring().TryPush(MakeEntry(i)));
  auto pushed = std::async(std::launch::async, [this] { return ring().Push(MakeEntry(8), 10s); });
  ASSERT_TRUE(YieldUntil([&] { return header()->producer_waiting.load() != 0; }));
  Entry e;
  ASSERT_TRUE(ring().Pop(&e, 1s).ok());
  EXPECT_TRUE(EntryIsValid(e, 0));
  ASSERT_EQ(pushed.wait_for(5s), std::future_status::ready);
  EXPECT_TRUE(pushed.get().ok());
  for (uint64_t i = 1; i <= kCapacity; ++i) {
    ASSERT_TRUE(ring().TryPop(&e));
    EXPECT_TRUE(EntryIsValid(e, i));
  }
}

TEST_F(SpscRingTest, CloseWakesBlockedPop) {
  ring().set_spin_iterations(0);
  auto popped = std::async(std::launch::async, [this] {
    Entry e{};
    return ring().Pop(&e, 30s);
  });
  ASSERT_TRUE(YieldUntil([&] { return header()->consumer_waiting.load() != 0; }));
  ring().Close();
  ASSERT_EQ(popped.wait_for(5s), std::future_status::ready) << "Close did not wake the consumer";
  EXPECT_EQ(popped.get().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(ring().closed());
}

TEST_F(SpscRingTest, CloseWakesBlockedPush) {
  ring().set_spin_iterations(0);
  for (uint64_t i = 0; i < kCapacity; ++i) ASSERT_TRUE(ring().TryPush(MakeEntry(i)));
  auto pushed = std::async(std::launch::async, [this] { return ring().Push(MakeEntry(9), 30s); });
  ASSERT_TRUE(YieldUntil([&] { return header()->producer_waiting.load() != 0; }));
  ring().Close();
  ASSERT_EQ(pushed.wait_for(5s), std::future_status::ready) << "Close did not wake the producer";
  EXPECT_EQ(pushed.get().code(), StatusCode::kUnavailable);
}

// Close() racing a consumer that is about to sleep: whatever the interleaving, the consumer
// wakes (a lost wake-up leaves it asleep for its whole 30 s timeout).
TEST_F(SpscRingTest, CloseRacingAWaiterAlwaysWakesIt) {
  for (int i = 0; i < 2000; ++i) {
    SpscRing<Entry> fresh = SpscRing<Entry>::Initialize(memory_.get(), kCapacity);
    fresh.set_spin_iterations(0);
    auto popped = std::async(std::launch::async, [&fresh] {
      Entry e{};
      return fresh.Pop(&e, 30s);
    });
    // Close after a varying head start, so that some rounds land in the waiter's window
    // between its checks and its sleep.
    const auto head_start = std::chrono::steady_clock::now() + std::chrono::microseconds(i % 100);
    while (std::chrono::steady_clock::now() < head_start) {
    }
    fresh.Close();
    ASSERT_EQ(popped.wait_for(10s), std::future_status::ready) << "lost wake-up, round " << i;
    ASSERT_EQ(popped.get().code(), StatusCode::kUnavailable);
  }
}

TEST_F(SpscRingTest, EntriesPushedBeforeCloseAreStillDelivered) {
  for (uint64_t i = 0; i < 3; ++i) ASSERT_TRUE(ring().Push(MakeEntry(i), 1s).ok());
  ring().Close();
  Entry e;
  for (uint64_t i = 0; i < 3; ++i) {
    const Status s = ring().Pop(&e, 1s);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_TRUE(EntryIsValid(e, i));
  }
  EXPECT_EQ(ring().Pop(&e, 1s).code(), StatusCode::kUnavailable);
}

TEST_F(SpscRingTest, AttachSeesTheSameRing) {
  ASSERT_TRUE(ring().TryPush(MakeEntry(5)));
  auto attached = SpscRing<Entry>::Attach(memory_.get(), memory_.size());
  ASSERT_TRUE(attached.ok()) << attached.status().ToString();
  EXPECT_EQ(attached->capacity(), kCapacity);
  EXPECT_EQ(attached->size(), 1u);
  Entry e;
  ASSERT_TRUE(attached->TryPop(&e));
  EXPECT_TRUE(EntryIsValid(e, 5));
  EXPECT_EQ(ring().size(), 0u);
}

TEST_F(SpscRingTest, AttachRejectsAMismatchedRing) {
  // Entry type of another size.
  auto wrong_type = SpscRing<uint64_t>::Attach(memory_.get(), memory_.size());
  EXPECT_EQ(wrong_type.status().code(), StatusCode::kInvalidArgument);
  // Region smaller than the header, or than the header plus the entries.
  EXPECT_EQ(SpscRing<Entry>::Attach(memory_.get(), sizeof(RingHeader) - 1).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(SpscRing<Entry>::Attach(memory_.get(), memory_.size() - 1).status().code(),
            StatusCode::kInvalidArgument);
  // A corrupted capacity.
  header()->capacity = 6;
  EXPECT_EQ(SpscRing<Entry>::Attach(memory_.get(), memory_.size()).status().code(),
            StatusCode::kInvalidArgument);
  header()->capacity = 0;
  EXPECT_EQ(SpscRing<Entry>::Attach(memory_.get(), memory_.size()).status().code(),
            StatusCode::kInvalidArgument);
}

// Producer in this process, consumer in a forked child; the child checks every entry and
// reports through its exit code (0 = all entries in order).
void RunAcrossProcesses(int spin_iterations, uint64_t count) {
  constexpr uint32_t kCap = 64;
  SharedMapping memory(SpscRing<Entry>::BytesFor(kCap));
  ASSERT_TRUE(memory.ok());
  auto ring = SpscRing<Entry>::Initialize(memory.get(), kCap);
  ring.set_spin_iterations(spin_iterations);

  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto attached = SpscRing<Entry>::Attach(memory.get(), memory.size());
    if (!attached.ok()) _exit(2);
    SpscRing<Entry> consumer = *attached;
    consumer.set_spin_iterations(spin_iterations);
    Entry e;
    for (uint64_t i = 0; i < count; ++i) {
      if (!consumer.Pop(&e, 10s).ok()) _exit(3);
      if (!EntryIsValid(e, i)) _exit(4);
    }
    // Nothing more than `count` arrives; the producer closes the ring when done.
    const Status last = consumer.Pop(&e, 10s);
    _exit(last.code() == StatusCode::kUnavailable ? 0 : 5);
  }
  for (uint64_t i = 0; i < count; ++i) {
    const Status s = ring.Push(MakeEntry(i), 10s);
    if (!s.ok()) {
      kill(child, SIGKILL);
      waitpid(child, nullptr, 0);
      FAIL() << "push " << i << ": " << s.ToString();
    }
  }
  ring.Close();
  int status = 0;
  ASSERT_TRUE(ReapChild(child, &status));
  ASSERT_TRUE(WIFEXITED(status)) << "child died by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "consumer exit code (3 pop failed, 4 bad entry)";
}

TEST_F(SpscRingTest, TwoProcessesPassEntriesInOrder) { RunAcrossProcesses(256, 200'000); }

TEST_F(SpscRingTest, TwoProcessesPassEntriesThroughFutexSleeps) {
  // No spinning: every empty/full ring sends its side to sleep on the futex.
  RunAcrossProcesses(0, 200'000);
}

TEST_F(SpscRingTest, ConsumerKilledWhileBlockedLeavesRingUsable) {
  ring().set_spin_iterations(0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto attached = SpscRing<Entry>::Attach(memory_.get(), memory_.size());
    if (!attached.ok()) _exit(2);
    SpscRing<Entry> consumer = *attached;
    consumer.set_spin_iterations(0);
    Entry e;
    // Takes two entries, then blocks for one that never comes until it is killed.
    for (int i = 0; i < 2; ++i) {
      if (!consumer.Pop(&e, 10s).ok()) _exit(3);
    }
    (void)consumer.Pop(&e, 60s);
    _exit(4);
  }
  ASSERT_TRUE(ring().Push(MakeEntry(0), 1s).ok());
  ASSERT_TRUE(ring().Push(MakeEntry(1), 1s).ok());
  // The child consumed both and is asleep on the futex.
  ASSERT_TRUE(YieldUntil(
      [&] { return header()->tail.load() == 2 && header()->consumer_waiting.load() != 0; }));
  ASSERT_EQ(kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_TRUE(ReapChild(child, &status));
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);

  // A producer facing a dead consumer: fills the ring, then times out instead of hanging.
  for (uint64_t i = 2; i < 2 + kCapacity; ++i) ASSERT_TRUE(ring().Push(MakeEntry(i), 1s).ok());
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(ring().Push(MakeEntry(99), 20ms).code(), StatusCode::kDeadlineExceeded);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);

  // The ring itself is intact: a new consumer (here: this process) drains it in order.
  Entry e;
  for (uint64_t i = 2; i < 2 + kCapacity; ++i) {
    ASSERT_TRUE(ring().Pop(&e, 1s).ok());
    EXPECT_TRUE(EntryIsValid(e, i));
  }
  EXPECT_FALSE(ring().TryPop(&e));
  ASSERT_TRUE(ring().Push(MakeEntry(1000), 1s).ok());
  ASSERT_TRUE(ring().Pop(&e, 1s).ok());
  EXPECT_TRUE(EntryIsValid(e, 1000));
}

TEST_F(SpscRingTest, ProducerBlockedOnFullRingTimesOutAfterConsumerDies) {
  ring().set_spin_iterations(0);
  for (uint64_t i = 0; i < kCapacity; ++i) ASSERT_TRUE(ring().TryPush(MakeEntry(i)));
  // A consumer that attaches, then is stuck elsewhere (blocked on a pipe nobody writes) and
  // never pops, until it is killed.
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(pipe_fds[1]);
    auto attached = SpscRing<Entry>::Attach(memory_.get(), memory_.size());
    if (!attached.ok()) _exit(2);
    char c;
    (void)read(pipe_fds[0], &c, 1);
    _exit(3);
  }
  close(pipe_fds[0]);
  // Block the producer on the full ring first, then kill the consumer under it.
  auto pushed = std::async(std::launch::async, [this] { return ring().Push(MakeEntry(8), 300ms); });
  ASSERT_TRUE(YieldUntil([&] { return header()->producer_waiting.load() != 0; }));
  ASSERT_EQ(kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_TRUE(ReapChild(child, &status));
  close(pipe_fds[1]);
  EXPECT_TRUE(WIFSIGNALED(status));
  ASSERT_EQ(pushed.wait_for(10s), std::future_status::ready) << "producer hung";
  EXPECT_EQ(pushed.get().code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(ring().size(), kCapacity);
}

}  // namespace
}  // namespace packrat::shm
