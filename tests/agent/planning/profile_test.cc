#include "agent/planning/profile.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace packrat {
namespace {

// A profile point without the optional measurement details.
ProfilePoint P(int threads, int batch, double latency_ms) {
  ProfilePoint p;
  p.threads = threads;
  p.batch = batch;
  p.latency_ms = latency_ms;
  return p;
}

class ProfileTest : public ::testing::Test {
 protected:
  // A unique path in the test's temporary directory, removed by TearDown.
  std::string TempPath(const std::string& name) {
    std::string path =
        ::testing::TempDir() + "profile_test_" + std::to_string(getpid()) + "_" + name;
    paths_.push_back(path);
    return path;
  }
  void TearDown() override {
    for (const std::string& path : paths_) std::remove(path.c_str());
  }

  // Parses `text` expecting failure; returns the error message.
  static std::string ParseError(std::string_view text) {
    StatusOr<Profile> profile = Profile::ParseCsv(text, "p.csv");
    EXPECT_FALSE(profile.ok()) << "parsed unexpectedly: " << text;
    if (profile.ok()) return "";
    EXPECT_EQ(profile.status().code(), StatusCode::kInvalidArgument);
    return profile.status().message();
  }

 private:
  std::vector<std::string> paths_;
};

TEST_F(ProfileTest, ParsesRequiredColumnsOnly) {
  StatusOr<Profile> profile = Profile::ParseCsv(
      "threads,batch,latency_ms\n"
      "2,4,10.5\n"
      "1,4,20\n"
      "1,1,5.25\n",
      "p.csv");
  ASSERT_TRUE(profile.ok()) << profile.status().ToString();
  EXPECT_EQ(profile->size(), 3u);
  EXPECT_EQ(profile->Latency(1, 1), 5.25);
  EXPECT_EQ(profile->Latency(1, 4), 20.0);
  EXPECT_EQ(profile->Latency(2, 4), 10.5);
  EXPECT_EQ(profile->Latency(2, 1), std::nullopt);
  EXPECT_EQ(profile->Find(2, 1), nullptr);
  EXPECT_EQ(profile->MaxThreads(), 2);
  EXPECT_EQ(profile->Batches(), (std::vector<int>{1, 4}));
  // points() is sorted by (threads, batch) whatever the file order.
  ASSERT_EQ(profile->points().size(), 3u);
  EXPECT_EQ(profile->points()[0].threads, 1);
  EXPECT_EQ(profile->points()[0].batch, 1);
  EXPECT_EQ(profile->points()[1].batch, 4);
  EXPECT_EQ(profile->points()[2].threads, 2);
  EXPECT_FALSE(profile->points()[0].latency_min_ms.has_value());
}

TEST_F(ProfileTest, ParsesOptionalColumnsInAnyOrderWithCommentsAndCrlf) {
  StatusOr<Profile> profile = Profile::ParseCsv(
      "\xEF\xBB\xBF# measured on a test machine\r\n"
      "\r\n"
      " batch , threads,iterations,latency_max_ms,latency_ms,latency_min_ms\r\n"
      "8,3,100,12.5,11,10\r\n"
      "  # a comment between rows\n"
      "16,3,,,20,\n",
      "p.csv");
  ASSERT_TRUE(profile.ok()) << profile.status().ToString();
  const ProfilePoint* p = profile->Find(3, 8);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->latency_ms, 11.0);
  EXPECT_EQ(p->latency_min_ms, 10.0);
  EXPECT_EQ(p->latency_max_ms, 12.5);
  EXPECT_EQ(p->iterations, 100);
  const ProfilePoint* q = profile->Find(3, 16);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->latency_ms, 20.0);
  EXPECT_FALSE(q->latency_min_ms.has_value());
  EXPECT_FALSE(q->latency_max_ms.has_value());
  EXPECT_FALSE(q->iterations.has_value());
}

TEST_F(ProfileTest, RejectsBadHeaders) {
  EXPECT_EQ(ParseError("threads,batch,latency\n1,1,1\n"),
            "p.csv:1: bad header: unknown column 'latency' (expected "
            "threads,batch,latency_ms[,latency_min_ms,latency_max_ms,iterations])");
  EXPECT_NE(ParseError("threads,latency_ms\n1,1\n")
                .find("p.csv:1: bad header: missing column "
                      "'batch'"),
            std::string::npos);
  EXPECT_NE(ParseError("# c\nthreads,batch,latency_ms,batch\n")
                .find("p.csv:2: bad header: "
                      "column 'batch' appears "
                      "twice"),
            std::string::npos);
  // A numeric first line is not a header.
  EXPECT_NE(ParseError("1,1,5.0\n").find("p.csv:1: bad header"), std::string::npos);
  EXPECT_NE(ParseError("").find("p.csv: empty profile"), std::string::npos);
  EXPECT_NE(ParseError("# only a comment\n\n").find("no header"), std::string::npos);
  EXPECT_EQ(ParseError("threads,batch,latency_ms\n"), "p.csv: profile has no data rows");
}

TEST_F(ProfileTest, RejectsBadRowsWithFileAndLine) {
  const std::string header = "threads,batch,latency_ms,latency_min_ms,latency_max_ms,iterations\n";
  EXPECT_EQ(ParseError(header + "1,1,5\n"), "p.csv:2: expected 6 fields, got 3");
  EXPECT_EQ(ParseError(header + "x,1,5,,,\n"), "p.csv:2: threads: 'x' is not an integer");
  EXPECT_EQ(ParseError(header + "1.5,1,5,,,\n"), "p.csv:2: threads: '1.5' is not an integer");
  EXPECT_EQ(ParseError(header + "1,,5,,,\n"), "p.csv:2: batch: '' is not an integer");
  EXPECT_EQ(ParseError(header + "1,1,fast,,,\n"),
            "p.csv:2: latency_ms: 'fast' is not a finite number");
  EXPECT_EQ(ParseError(header + "1,1,inf,,,\n"),
            "p.csv:2: latency_ms: 'inf' is not a finite number");
  EXPECT_EQ(ParseError(header + "1,1,nan,,,\n"),
            "p.csv:2: latency_ms: 'nan' is not a finite number");
  EXPECT_EQ(ParseError(header + "1,1,5ms,,,\n"),
            "p.csv:2: latency_ms: '5ms' is not a finite number");
  EXPECT_EQ(ParseError(header + "1,1,5,x,,\n"),
            "p.csv:2: latency_min_ms: 'x' is not a finite number");
  EXPECT_EQ(ParseError(header + "1,1,5,,,many\n"), "p.csv:2: iterations: 'many' is not an integer");
  EXPECT_EQ(ParseError(header + "1,1,5,,,\n0,1,5,,,\n"), "p.csv:3: threads must be >= 1, got 0");
  EXPECT_EQ(ParseError(header + "1,-2,5,,,\n"), "p.csv:2: batch must be >= 1, got -2");
  EXPECT_EQ(ParseError(header + "1,1,0,,,\n"), "p.csv:2: latency_ms must be finite and > 0, got 0");
  EXPECT_EQ(ParseError(header + "1,1,-3,,,\n"),
            "p.csv:2: latency_ms must be finite and > 0, got -3");
  EXPECT_EQ(ParseError(header + "1,1,5,0,,\n"),
            "p.csv:2: latency_min_ms must be finite and > 0, got 0");
  EXPECT_EQ(ParseError(header + "1,1,5,6,,\n"), "p.csv:2: latency_min_ms 6 exceeds latency_ms 5");
  EXPECT_EQ(ParseError(header + "1,1,5,,4,\n"), "p.csv:2: latency_max_ms 4 is below latency_ms 5");
  EXPECT_EQ(ParseError(header + "1,1,5,,,0\n"), "p.csv:2: iterations must be >= 1, got 0");
  EXPECT_EQ(ParseError(header + "99999999999,1,5,,,\n"),
            "p.csv:2: threads: '99999999999' is not an integer");
}

TEST_F(ProfileTest, RejectsDuplicatePoints) {
  EXPECT_EQ(ParseError("threads,batch,latency_ms\n1,1,5\n2,1,4\n\n1,1,6\n"),
            "p.csv:5: duplicate point threads=1 batch=1 (first at line 2)");
}

TEST_F(ProfileTest, AddKeepsOrderAndRejectsBadPoints) {
  Profile profile;
  EXPECT_TRUE(profile.empty());
  EXPECT_EQ(profile.MaxThreads(), 0);
  EXPECT_TRUE(profile.Batches().empty());
  ASSERT_TRUE(profile.Add(P(2, 1, 3)).ok());
  ASSERT_TRUE(profile.Add(P(1, 2, 4)).ok());
  ASSERT_TRUE(profile.Add(P(1, 1, 5)).ok());
  Status dup = profile.Add(P(1, 2, 9));
  EXPECT_EQ(dup.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(dup.message(), "duplicate point threads=1 batch=2");
  EXPECT_EQ(profile.Add(P(3, 1, 0)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(profile.Add(P(3, 0, 1)).code(), StatusCode::kInvalidArgument);
  ASSERT_EQ(profile.size(), 3u);
  EXPECT_EQ(profile.Latency(1, 2), 4.0);  // not overwritten by the rejected duplicate
  EXPECT_EQ(profile.points()[0].batch, 1);
  EXPECT_EQ(profile.points()[1].batch, 2);
  EXPECT_EQ(profile.points()[2].threads, 2);
}

TEST_F(ProfileTest, InterpolatedLatencyBetweenAndBeyondProfiledBatches) {
  StatusOr<Profile> profile =
      Profile::ParseCsv("threads,batch,latency_ms\n1,2,20\n1,4,30\n1,8,70\n2,1,5\n", "p.csv");
  ASSERT_TRUE(profile.ok()) << profile.status().ToString();
  EXPECT_DOUBLE_EQ(*profile->InterpolatedLatency(1, 4), 30);    // profiled
  EXPECT_DOUBLE_EQ(*profile->InterpolatedLatency(1, 3), 25);    // between 2 and 4
  EXPECT_DOUBLE_EQ(*profile->InterpolatedLatency(1, 6), 50);    // between 4 and 8
  EXPECT_DOUBLE_EQ(*profile->InterpolatedLatency(1, 1), 10);    // below: proportional to b = 2
  EXPECT_DOUBLE_EQ(*profile->InterpolatedLatency(1, 16), 140);  // above: proportional to b = 8
  EXPECT_DOUBLE_EQ(*profile->InterpolatedLatency(2, 3), 15);
  EXPECT_FALSE(profile->InterpolatedLatency(3, 1));
  EXPECT_FALSE(profile->InterpolatedLatency(1, 0));
}

TEST_F(ProfileTest, CsvRoundTripsExactly) {
  Profile profile;
  ASSERT_TRUE(profile.Add(P(1, 1, 0.1 + 0.2)).ok());
  ProfilePoint full = P(4, 16, 286.142);
  full.latency_min_ms = 281.757;
  full.latency_max_ms = 307.657;
  full.iterations = 100;
  ASSERT_TRUE(profile.Add(full).ok());
  std::string csv = profile.ToCsv();
  EXPECT_EQ(csv,
            "threads,batch,latency_ms,latency_min_ms,latency_max_ms,iterations\n"
            "1,1,0.30000000000000004,,,\n"
            "4,16,286.142,281.757,307.657,100\n");
  StatusOr<Profile> parsed = Profile::ParseCsv(csv, "round-trip");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(*parsed, profile);

  Profile plain;
  ASSERT_TRUE(plain.Add(P(2, 8, 12.5)).ok());
  EXPECT_EQ(plain.ToCsv(), "threads,batch,latency_ms\n2,8,12.5\n");
}

TEST_F(ProfileTest, WriteCsvThenLoadCsv) {
  Profile profile;
  ProfilePoint point = P(3, 2, 7.75);
  point.iterations = 5;
  ASSERT_TRUE(profile.Add(point).ok());
  const std::string path = TempPath("write.csv");
  ASSERT_TRUE(profile.WriteCsv(path).ok());
  StatusOr<Profile> loaded = Profile::LoadCsv(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(*loaded, profile);

  // Overwrites an existing file.
  ASSERT_TRUE(profile.Add(P(1, 2, 9)).ok());
  ASSERT_TRUE(profile.WriteCsv(path).ok());
  loaded = Profile::LoadCsv(path);
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->size(), 2u);

  Status bad = profile.WriteCsv(::testing::TempDir() + "no/such/dir/p.csv");
  EXPECT_EQ(bad.code(), StatusCode::kInternal);
  EXPECT_NE(bad.message().find("no/such/dir/p.csv"), std::string::npos);
}

TEST_F(ProfileTest, LoadCsvReportsUnreadableFile) {
  StatusOr<Profile> missing = Profile::LoadCsv("/nonexistent/profile.csv");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("/nonexistent/profile.csv"), std::string::npos);

  StatusOr<Profile> directory = Profile::LoadCsv(::testing::TempDir());
  ASSERT_FALSE(directory.ok());
  EXPECT_EQ(directory.status().code(), StatusCode::kNotFound);
  EXPECT_NE(directory.status().message().find("cannot read profile"), std::string::npos);

  const std::string path = TempPath("bad.csv");
  std::ofstream(path) << "threads,batch,latency_ms\n1,1,5\n1,2,oops\n";
  StatusOr<Profile> bad = Profile::LoadCsv(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), path + ":3: latency_ms: 'oops' is not a finite number");
}

TEST_F(ProfileTest, LoadsPublishedProfiles) {
  for (const char* model : {"bert-base", "gpt2", "inception-v3", "resnet50"}) {
    SCOPED_TRACE(model);
    StatusOr<Profile> profile = Profile::LoadCsv(std::string(PACKRAT_PROFILES_DIR) + "/" +
                                                 model + "-xeon6142-16c.csv");
    ASSERT_TRUE(profile.ok()) << profile.status().ToString();
    EXPECT_EQ(profile->size(), 176u);
    EXPECT_EQ(profile->MaxThreads(), 16);
    EXPECT_EQ(profile->Batches(), (std::vector<int>{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}));
    for (int t = 1; t <= 16; ++t) {
      for (int b : profile->Batches()) EXPECT_TRUE(profile->Latency(t, b).has_value());
    }
  }
}

}  // namespace
}  // namespace packrat
