#include "shm/segment.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "shm/futex.h"
#include "shm/layout.h"
#include "tests/shm/child_process.h"

namespace packrat::shm {
namespace {

using namespace std::chrono_literals;

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

class SegmentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    name_ = Segment::MakeName(getpid(), std::string("segtest.") + info->name());
    (void)Segment::Remove(name_);  // left over from a crashed run
  }
  void TearDown() override { (void)Segment::Remove(name_); }

  static SegmentOptions Options() {
    SegmentOptions o;
    o.num_slots = 3;
    o.ring_capacity = 4;
    o.slot_input_bytes = 10000;  // rounded up to pages
    o.slot_output_bytes = 5000;
    return o;
  }

  std::unique_ptr<Segment> CreateOrDie() {
    auto created = Segment::Create(name_, Options());
    EXPECT_TRUE(created.ok()) << created.status().ToString();
    return created.ok() ? std::move(created).value() : nullptr;
  }

  std::string name_;
};

TEST_F(SegmentTest, MakeNameEmbedsPidIncarnationAndSanitisesTag) {
  EXPECT_EQ(Segment::MakeName(123, "demo.0", "0a1b2c3d"), "packrat.123.0a1b2c3d.demo.0");
  EXPECT_EQ(Segment::MakeName(7, "a/b c:d-E_9", "ffffffff"), "packrat.7.ffffffff.a_b_c_d-E_9");
  // One incarnation per process: eight hex digits, the default.
  const std::string& incarnation = Segment::Incarnation();
  EXPECT_EQ(incarnation.size(), 8u);
  EXPECT_EQ(incarnation.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(&Segment::Incarnation(), &incarnation);
  EXPECT_EQ(Segment::MakeName(5, "x"), "packrat.5." + incarnation + ".x");
}

TEST_F(SegmentTest, CreateLaysOutAlignedNonOverlappingSlabs) {
  auto seg = CreateOrDie();
  ASSERT_NE(seg, nullptr);
  EXPECT_EQ(seg->name(), name_);
  EXPECT_EQ(seg->num_slots(), 3u);
  EXPECT_EQ(seg->input_capacity(), 12288u);
  EXPECT_EQ(seg->output_capacity(), 8192u);
  EXPECT_EQ(seg->state(), RuntimeState::kStarting);
  EXPECT_EQ(seg->header()->magic, kSegmentMagic);
  EXPECT_EQ(seg->header()->version, kLayoutVersion);
  EXPECT_EQ(seg->header()->agent_pid, getpid());
  EXPECT_EQ(seg->ErrorText(), "");
  EXPECT_EQ(seg->requests().capacity(), 4u);
  EXPECT_EQ(seg->completions().capacity(), 4u);

  const auto* base = reinterpret_cast<const uint8_t*>(seg->header());
  const uint8_t* end = base + seg->header()->segment_size;
  const uint8_t* previous_end = base + seg->header()->slots_offset;
  for (uint32_t s = 0; s < seg->num_slots(); ++s) {
    EXPECT_EQ((seg->input_slab(s) - base) % 4096, 0) << "slot " << s;
    EXPECT_EQ((seg->output_slab(s) - base) % 4096, 0) << "slot " << s;
    EXPECT_EQ(seg->input_slab(s), previous_end);
    EXPECT_EQ(seg->output_slab(s), seg->input_slab(s) + seg->input_capacity());
    previous_end = seg->output_slab(s) + seg->output_capacity();
    EXPECT_LE(previous_end, end);
  }
  // Every byte of every slab is writable.
  for (uint32_t s = 0; s < seg->num_slots(); ++s) {
    std::memset(seg->input_slab(s), 0xa0 + s, seg->input_capacity());
    std::memset(seg->output_slab(s), 0xb0 + s, seg->output_capacity());
  }
  for (uint32_t s = 0; s < seg->num_slots(); ++s) {
    EXPECT_EQ(seg->input_slab(s)[seg->input_capacity() - 1], 0xa0 + s);
    EXPECT_EQ(seg->output_slab(s)[0], 0xb0 + s);
  }
}

TEST_F(SegmentTest, OpenSeesTheCreatorsSlabsRingsAndState) {
  auto created = CreateOrDie();
  ASSERT_NE(created, nullptr);
  auto opened = Segment::Open(name_);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  Segment& peer = **opened;

  EXPECT_EQ(peer.num_slots(), created->num_slots());
  EXPECT_EQ(peer.input_capacity(), created->input_capacity());
  EXPECT_EQ(peer.output_capacity(), created->output_capacity());
  EXPECT_EQ(peer.header()->segment_size, created->header()->segment_size);
  EXPECT_EQ(peer.header()->agent_pid, getpid());
  const auto* a = reinterpret_cast<const uint8_t*>(created->header());
  const auto* b = reinterpret_cast<const uint8_t*>(peer.header());
  for (uint32_t s = 0; s < peer.num_slots(); ++s) {
    EXPECT_EQ(peer.input_slab(s) - b, created->input_slab(s) - a);
    EXPECT_EQ(peer.output_slab(s) - b, created->output_slab(s) - a);
  }

  // The bytes, the rings and the state are shared, not copies.
  std::strcpy(reinterpret_cast<char*>(created->input_slab(2)), "rows");
  EXPECT_STREQ(reinterpret_cast<const char*>(peer.input_slab(2)), "rows");
  BatchMessage request{};
  request.batch_id = 17;
  request.slot = 1;
  ASSERT_TRUE(created->requests().TryPush(request));
  BatchMessage received{};
  ASSERT_TRUE(peer.requests().TryPop(&received));
  EXPECT_EQ(received.batch_id, 17u);
  EXPECT_EQ(received.slot, 1u);
  EXPECT_EQ(created->state(), RuntimeState::kStarting);
  peer.SetState(RuntimeState::kReady);
  EXPECT_EQ(created->state(), RuntimeState::kReady);
}

// The runtime can write the whole header. Fields it rewrites after the agent created the
// segment change neither the agent's slab addresses nor its rings' capacities: every push
// stays inside the ring.
TEST_F(SegmentTest, TheCreatorKeepsItsGeometryWhenThePeerRewritesTheHeader) {
  auto seg = CreateOrDie();
  ASSERT_NE(seg, nullptr);
  const uint8_t* slab = seg->input_slab(2);
  const uint8_t* output = seg->output_slab(2);
  auto* base = reinterpret_cast<uint8_t*>(seg->header());
  auto* ring = reinterpret_cast<RingHeader*>(base + seg->header()->request_ring_offset);
  // What a broken or hostile runtime might write.
  seg->header()->num_slots = 1000;
  seg->header()->slots_offset = 1ull << 40;
  seg->header()->slot_input_bytes = 1ull << 40;
  seg->header()->slot_output_bytes = 1ull << 40;
  ring->capacity = 1u << 30;

  EXPECT_EQ(seg->num_slots(), 3u);
  EXPECT_EQ(seg->input_capacity(), 12288u);
  EXPECT_EQ(seg->output_capacity(), 8192u);
  EXPECT_EQ(seg->input_slab(2), slab);
  EXPECT_EQ(seg->output_slab(2), output);
  EXPECT_EQ(seg->requests().capacity(), 4u);
  BatchMessage m{};
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(seg->requests().TryPush(m)) << i;
  EXPECT_FALSE(seg->requests().TryPush(m));  // full at the capacity it was created with
}

// Slabs are sparse until written; Reserve backs their pages now, and a reservation /dev/shm
// cannot hold is an error instead of the SIGBUS a write there would be.
TEST_F(SegmentTest, ReserveBacksPagesAndReportsAFullDevShm) {
  auto seg = CreateOrDie();
  ASSERT_NE(seg, nullptr);
  struct stat before {};
  ASSERT_EQ(stat(("/dev/shm/" + name_).c_str(), &before), 0);
  ASSERT_TRUE(seg->Reserve(seg->input_slab(1), seg->input_capacity()).ok());
  struct stat after {};
  ASSERT_EQ(stat(("/dev/shm/" + name_).c_str(), &after), 0);
  EXPECT_GE((after.st_blocks - before.st_blocks) * 512, static_cast<blkcnt_t>(12288));
  EXPECT_TRUE(seg->Reserve(seg->input_slab(1), seg->input_capacity()).ok());  // again: no-op

  const auto* base = reinterpret_cast<const uint8_t*>(seg->header());
  const uint64_t size = seg->header()->segment_size;
  EXPECT_EQ(seg->Reserve(base + size - 10, 11).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(seg->Reserve(base - 1, 1).code(), StatusCode::kInvalidArgument);

  // A slab larger than all of /dev/shm: creating it is fine (sparse), backing it is not.
  struct statvfs shm {};
  ASSERT_EQ(statvfs("/dev/shm", &shm), 0);
  if (shm.f_blocks == 0) GTEST_SKIP() << "/dev/shm has no size limit";
  const uint64_t total = static_cast<uint64_t>(shm.f_blocks) * shm.f_frsize;
  seg.reset();
  SegmentOptions huge = Options();
  huge.num_slots = 1;
  huge.slot_input_bytes = total + (1 << 20);
  auto big = Segment::Create(name_, huge);
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  const Status full = (*big)->Reserve((*big)->input_slab(0), (*big)->input_capacity());
  EXPECT_EQ(full.code(), StatusCode::kUnavailable) << full.ToString();
  EXPECT_NE(full.message().find("/dev/shm"), std::string::npos) << full.ToString();
}

TEST_F(SegmentTest, OpenOfMissingNameIsNotFound) {
  auto opened = Segment::Open(name_);
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), StatusCode::kNotFound);
  EXPECT_NE(opened.status().message().find(name_), std::string::npos);
}

TEST_F(SegmentTest, OpenRejectsBadMagic) {
  auto seg = CreateOrDie();
  ASSERT_NE(seg, nullptr);
  seg->header()->magic ^= 1;
  auto opened = Segment::Open(name_);
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(opened.status().message().find("magic"), std::string::npos)
      << opened.status().message();
}

TEST_F(SegmentTest, OpenRejectsOtherLayoutVersion) {
  auto seg = CreateOrDie();
  ASSERT_NE(seg, nullptr);
  seg->header()->version = kLayoutVersion + 41;
  auto opened = Segment::Open(name_);
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(opened.status().message().find("version " + std::to_string(kLayoutVersion + 41)),
            std::string::npos)
      << opened.status().message();
}

TEST_F(SegmentTest, OpenRejectsSizeMismatch) {
  auto seg = CreateOrDie();
  ASSERT_NE(seg, nullptr);
  seg->header()->segment_size += 4096;
  auto opened = Segment::Open(name_);
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(opened.status().message().find("size"), std::string::npos) << opened.status().message();
}

TEST_F(SegmentTest, OpenRejectsRegionsOutsideTheSegment) {
  auto seg = CreateOrDie();
  ASSERT_NE(seg, nullptr);
  SegmentHeader* h = seg->header();
  const uint64_t input_bytes = h->slot_input_bytes;
  h->slot_input_bytes = h->segment_size;  // slabs would run past the end
  auto opened = Segment::Open(name_);
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), StatusCode::kInvalidArgument);
  h->slot_input_bytes = input_bytes;

  const uint32_t slots = h->num_slots;
  h->num_slots = 0;
  EXPECT_FALSE(Segment::Open(name_).ok());
  h->num_slots = slots + 1;  // one slot more than the mapping holds
  EXPECT_FALSE(Segment::Open(name_).ok());
  h->num_slots = slots;

  const uint64_t completion = h->completion_ring_offset;
  h->completion_ring_offset = h->request_ring_offset;  // rings out of order
  EXPECT_FALSE(Segment::Open(name_).ok());
  h->completion_ring_offset = completion;

  // A ring header with a corrupted entry size is refused too.
  auto* ring = reinterpret_cast<RingHeader*>(reinterpret_cast<char*>(h) + h->request_ring_offset);
  const uint32_t entry_size = ring->entry_size;
  ring->entry_size = entry_size + 8;
  EXPECT_FALSE(Segment::Open(name_).ok());
  ring->entry_size = entry_size;

  // Rings must not overlap the header, nor sit at unaligned offsets (their atomics would be
  // misaligned): both refused before any ring field is read.
  const uint64_t request = h->request_ring_offset;
  h->request_ring_offset = 8;
  EXPECT_FALSE(Segment::Open(name_).ok());
  h->request_ring_offset = request + 4;
  EXPECT_EQ(Segment::ValidateMapping(h, h->segment_size).message(),
            "segment regions are not aligned");
  h->request_ring_offset = request;

  EXPECT_TRUE(Segment::Open(name_).ok()) << "the restored header should open again";
  EXPECT_TRUE(Segment::ValidateMapping(h, h->segment_size).ok());
  EXPECT_FALSE(Segment::ValidateMapping(h, h->segment_size - 64).ok()) << "size mismatch";
}

TEST_F(SegmentTest, OpenRejectsObjectSmallerThanHeader) {
  const std::string path = "/" + name_;
  const int fd = shm_open(path.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  ASSERT_EQ(ftruncate(fd, 64), 0);
  close(fd);
  auto opened = Segment::Open(name_);
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(opened.status().message().empty());
}

TEST_F(SegmentTest, CreateRejectsBadOptions) {
  SegmentOptions o = Options();
  o.num_slots = 0;
  EXPECT_EQ(Segment::Create(name_, o).status().code(), StatusCode::kInvalidArgument);
  o = Options();
  o.ring_capacity = 6;
  EXPECT_EQ(Segment::Create(name_, o).status().code(), StatusCode::kInvalidArgument);
  o = Options();
  o.num_slots = 8;
  o.ring_capacity = 4;  // fewer ring entries than batches in flight
  EXPECT_EQ(Segment::Create(name_, o).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Segment::Open(name_).status().code(), StatusCode::kNotFound);
}

TEST_F(SegmentTest, CreateOfExistingNameFailsAndKeepsTheExistingSegment) {
  auto first = CreateOrDie();
  ASSERT_NE(first, nullptr);
  first->SetState(RuntimeState::kReady);
  auto second = Segment::Create(name_, Options());
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find(name_), std::string::npos);
  // The failed Create must not have removed the segment that was already there.
  auto opened = Segment::Open(name_);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EXPECT_EQ((*opened)->state(), RuntimeState::kReady);
}

TEST_F(SegmentTest, CreatorRemovesTheNameOnDestruction) {
  {
    auto seg = CreateOrDie();
    ASSERT_NE(seg, nullptr);
    auto opened = Segment::Open(name_);
    ASSERT_TRUE(opened.ok());
    // An opener going away leaves the name in place.
    opened = Segment::Open(name_);
    ASSERT_TRUE(opened.ok());
  }
  EXPECT_EQ(Segment::Open(name_).status().code(), StatusCode::kNotFound);
}

TEST_F(SegmentTest, OpenerDoesNotRemoveTheName) {
  auto seg = CreateOrDie();
  ASSERT_NE(seg, nullptr);
  { ASSERT_TRUE(Segment::Open(name_).ok()); }
  EXPECT_TRUE(Segment::Open(name_).ok());
}

TEST_F(SegmentTest, RemoveIsIdempotent) {
  auto seg = CreateOrDie();
  ASSERT_NE(seg, nullptr);
  EXPECT_TRUE(Segment::Remove(name_).ok());
  EXPECT_EQ(Segment::Open(name_).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(Segment::Remove(name_).ok());
  // The creator's mapping stays valid after the name is gone.
  seg->SetState(RuntimeState::kStopped);
  EXPECT_EQ(seg->state(), RuntimeState::kStopped);
}

TEST_F(SegmentTest, RemoveStaleRemovesDeadAgentsAndEarlierIncarnationsAndKeepsLiveOnes) {
  // A pid that is certainly dead: a child that exited and was reaped.
  const pid_t dead = fork();
  ASSERT_GE(dead, 0);
  if (dead == 0) _exit(0);
  int status = 0;
  ASSERT_TRUE(ReapChild(dead, &status));

  // A live process other than us: a child blocked reading a pipe until we close it.
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const pid_t live = fork();
  ASSERT_GE(live, 0);
  if (live == 0) {
    close(pipe_fds[1]);
    char c;
    (void)read(pipe_fds[0], &c, 1);
    _exit(0);
  }
  close(pipe_fds[0]);

  const std::string dead_name = Segment::MakeName(dead, "segtest.stale");
  const std::string live_name = Segment::MakeName(live, "segtest.live");
  const std::string own_name = name_;
  // An earlier process with our pid (a restarted container's PID 1) left this one behind, and
  // one named before names had incarnations.
  const std::string earlier_name = Segment::MakeName(
      getpid(), "segtest.earlier", Segment::Incarnation() == "0000beef" ? "0000cafe" : "0000beef");
  const std::string unversioned_name = "packrat." + std::to_string(getpid()) + ".segtest.0";
  for (const std::string& name : {dead_name, live_name, earlier_name, unversioned_name}) {
    (void)Segment::Remove(name);
  }
  auto dead_seg = Segment::Create(dead_name, Options());
  auto live_seg = Segment::Create(live_name, Options());
  auto own_seg = Segment::Create(own_name, Options());
  auto earlier_seg = Segment::Create(earlier_name, Options());
  auto unversioned_seg = Segment::Create(unversioned_name, Options());
  ASSERT_TRUE(dead_seg.ok() && live_seg.ok() && own_seg.ok() && earlier_seg.ok() &&
              unversioned_seg.ok());

  const std::vector<std::string> removed = Segment::RemoveStale();
  EXPECT_TRUE(Contains(removed, dead_name));
  EXPECT_FALSE(Contains(removed, live_name));
  EXPECT_FALSE(Contains(removed, own_name));
  EXPECT_TRUE(Contains(removed, earlier_name));
  EXPECT_TRUE(Contains(removed, unversioned_name));
  // The name is free again for this process (an agent restarted as PID 1 creates the same one).
  EXPECT_TRUE(Segment::Create(earlier_name, Options()).ok());
  EXPECT_EQ(Segment::Open(dead_name).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(Segment::Open(live_name).ok());
  EXPECT_TRUE(Segment::Open(own_name).ok());

  close(pipe_fds[1]);
  ASSERT_TRUE(ReapChild(live, &status));
  live_seg.value().reset();  // the creator removes live_name
  EXPECT_EQ(Segment::Open(live_name).status().code(), StatusCode::kNotFound);
}

TEST_F(SegmentTest, FailRecordsTheErrorForThePeer) {
  auto seg = CreateOrDie();
  ASSERT_NE(seg, nullptr);
  auto opened = Segment::Open(name_);
  ASSERT_TRUE(opened.ok());
  (*opened)->Fail("cannot load model: file not found");
  EXPECT_EQ(seg->state(), RuntimeState::kFailed);
  EXPECT_EQ(seg->ErrorText(), "cannot load model: file not found");

  // Messages longer than the field are cut, NUL-terminated.
  (*opened)->Fail(std::string(2 * kErrorTextSize, 'x'));
  EXPECT_EQ(seg->ErrorText(), std::string(kErrorTextSize - 1, 'x'));

  for (RuntimeState s : {RuntimeState::kStarting, RuntimeState::kReady, RuntimeState::kStopped}) {
    seg->SetState(s);
    EXPECT_EQ((*opened)->state(), s);
  }
}

TEST_F(SegmentTest, RuntimeProcessOpensAndServesTheSegment) {
  auto seg = CreateOrDie();
  ASSERT_NE(seg, nullptr);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The "runtime": open by name, announce readiness, answer one batch, then stop.
    auto opened = Segment::Open(name_);
    if (!opened.ok()) _exit(2);
    Segment& s = **opened;
    s.header()->runtime_pid.store(getpid());
    s.SetState(RuntimeState::kReady);
    BatchMessage request;
    if (!s.requests().Pop(&request, 10s).ok()) _exit(3);
    const char* input = reinterpret_cast<const char*>(s.input_slab(request.slot));
    CompletionMessage done{};
    done.batch_id = request.batch_id;
    done.slot = request.slot;
    done.status = CompletionStatus::kOk;
    std::strcpy(reinterpret_cast<char*>(s.output_slab(request.slot)), input);
    if (!s.completions().Push(done, 10s).ok()) _exit(4);
    _exit(0);
  }
  // Wait for kReady on the state futex, as the agent does.
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (seg->state() != RuntimeState::kReady) {
    const auto left = deadline - std::chrono::steady_clock::now();
    ASSERT_GT(left, 0ns) << "runtime never became ready";
    FutexWait(&seg->header()->state, static_cast<uint32_t>(RuntimeState::kStarting), left);
  }
  EXPECT_EQ(seg->header()->runtime_pid.load(), child);
  std::strcpy(reinterpret_cast<char*>(seg->input_slab(1)), "hello runtime");
  BatchMessage request{};
  request.batch_id = 5;
  request.slot = 1;
  ASSERT_TRUE(seg->requests().Push(request, 1s).ok());
  CompletionMessage done;
  ASSERT_TRUE(seg->completions().Pop(&done, 10s).ok());
  EXPECT_EQ(done.batch_id, 5u);
  EXPECT_EQ(done.status, CompletionStatus::kOk);
  EXPECT_STREQ(reinterpret_cast<const char*>(seg->output_slab(1)), "hello runtime");
  int status = 0;
  ASSERT_TRUE(ReapChild(child, &status));
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace packrat::shm
