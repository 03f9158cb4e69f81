// The induction probe (random and from a file), head lists and top-head
// ranking of head_scan.h; no model needed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "service/engine/head_scan.h"
#include "tests/common/temp_path.h"

namespace attnscope::engine {
namespace {

model::ModelConfig Gpt2Like() {
  model::ModelConfig c;
  c.num_layers = 12;
  c.num_heads = 12;
  c.vocab_size = 50257;
  c.max_positions = 1024;
  c.bos_token_id = 50256;
  c.eos_token_id = 50256;
  return c;
}

// A file under a unique name, removed when the test exits.
std::string WriteTemp(const std::string& contents) {
  const std::string path = test::UniqueTempPath("probe.txt");
  std::ofstream(path) << contents;
  return path;
}

TEST(ProbeTest, RandomProbeHasBosThenTheSameSpanTwice) {
  ProbeSpec spec;  // n = 50, 4 sequences, seed 0, ids 1000..9999
  auto probe = MakeRandomProbe(Gpt2Like(), spec);
  ASSERT_TRUE(probe.ok()) << probe.status();
  ASSERT_EQ(probe->sequences.size(), 4u);
  EXPECT_EQ(probe->n, 50);
  for (const auto& s : probe->sequences) {
    ASSERT_EQ(s.size(), 101u);
    EXPECT_EQ(s[0], 50256);
    for (int k = 1; k <= 50; ++k) {
      EXPECT_EQ(s[k], s[k + 50]);
      EXPECT_GE(s[k], 1000);
      EXPECT_LE(s[k], 9999);
    }
  }
  EXPECT_NE(probe->sequences[0], probe->sequences[1]);
}

TEST(ProbeTest, RandomProbeFollowsTheDocumentedGenerator) {
  ProbeSpec spec;
  spec.n = 5;
  spec.num_sequences = 2;
  spec.seed = 42;
  auto probe = MakeRandomProbe(Gpt2Like(), spec);
  ASSERT_TRUE(probe.ok());
  // mt19937_64(seed); r = 1000 + u % 9000 for raw outputs u below the
  // rejection limit, sequence by sequence.
  std::mt19937_64 rng(42);
  const uint64_t limit = std::numeric_limits<uint64_t>::max() / 9000 * 9000;
  for (int s = 0; s < 2; ++s) {
    for (int k = 1; k <= 5; ++k) {
      uint64_t u = rng();
      while (u >= limit) u = rng();
      EXPECT_EQ(probe->sequences[s][k], static_cast<int64_t>(1000 + u % 9000)) << s << "," << k;
    }
  }
  auto again = MakeRandomProbe(Gpt2Like(), spec);
  EXPECT_EQ(again->sequences, probe->sequences);
  spec.seed = 43;
  EXPECT_NE(MakeRandomProbe(Gpt2Like(), spec)->sequences, probe->sequences);
}

TEST(ProbeTest, RandomProbeThatDoesNotFitTheModelIsRefused) {
  model::ModelConfig small = Gpt2Like();
  small.vocab_size = 1000;
  auto probe = MakeRandomProbe(small, ProbeSpec{});
  EXPECT_EQ(probe.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(probe.status().message().find("1000..9999"), std::string::npos) << probe.status();
  EXPECT_NE(probe.status().message().find("ids file"), std::string::npos);

  ProbeSpec long_probe;
  long_probe.n = 512;  // 1025 tokens > 1024 positions
  auto too_long = MakeRandomProbe(Gpt2Like(), long_probe);
  EXPECT_NE(too_long.status().message().find("1..511"), std::string::npos) << too_long.status();

  model::ModelConfig no_bos = Gpt2Like();
  no_bos.bos_token_id = no_bos.eos_token_id = -1;
  EXPECT_FALSE(MakeRandomProbe(no_bos, ProbeSpec{}).ok());
  ProbeSpec none;
  none.num_sequences = 0;
  EXPECT_FALSE(MakeRandomProbe(Gpt2Like(), none).ok());
}

TEST(ProbeTest, FileWithCommasSpacesAndComments) {
  const std::string path = WriteTemp("# two probes, n = 2\n0, 5, 6, 5, 6\n\n  0 7\t8 7 8\n");
  auto probe = ReadProbeFile(path);
  ASSERT_TRUE(probe.ok()) << probe.status();
  EXPECT_EQ(probe->n, 2);
  ASSERT_EQ(probe->sequences.size(), 2u);
  EXPECT_EQ(probe->sequences[1], (std::vector<int64_t>{0, 7, 8, 7, 8}));
  EXPECT_TRUE(ValidateProbe(Gpt2Like(), *probe).ok());
  std::remove(path.c_str());
}

TEST(ProbeTest, BadFilesNameTheLine) {
  const std::string even = WriteTemp("1,2,3,4\n");
  EXPECT_NE(ReadProbeFile(even).status().message().find(":1: 4 ids"), std::string::npos);
  const std::string ragged = WriteTemp("1,2,3\n1,2,3,4,5\n");
  auto r = ReadProbeFile(ragged);
  EXPECT_NE(r.status().message().find(":2: 5 ids, expected 2n+1 = 3"), std::string::npos)
      << r.status();
  EXPECT_FALSE(ReadProbeFile(ragged, 2).ok());  // line 1 has 3 ids, not 5
  const std::string word = WriteTemp("1,2,x\n");
  EXPECT_NE(ReadProbeFile(word).status().message().find("'x' is not a token id"),
            std::string::npos);
  const std::string empty = WriteTemp("# nothing\n\n");
  EXPECT_FALSE(ReadProbeFile(empty).ok());
  EXPECT_EQ(ReadProbeFile("/nonexistent/probe.txt").status().code(), absl::StatusCode::kNotFound);
  for (const std::string& p : {even, ragged, word, empty}) std::remove(p.c_str());
}

TEST(ProbeTest, ValidationNamesSequenceAndPosition) {
  Probe probe{2, {{0, 5, 6, 5, 6}, {0, 5, 60000, 5, 6}}};
  const absl::Status s = ValidateProbe(Gpt2Like(), probe);
  EXPECT_EQ(s.message(),
            "probe sequence 1, position 2: id 60000 is outside the vocabulary [0, 50257)");
  EXPECT_FALSE(ValidateProbe(Gpt2Like(), Probe{2, {{0, 1, 2}}}).ok());
  EXPECT_FALSE(ValidateProbe(Gpt2Like(), Probe{2, {}}).ok());
}

TEST(HeadListTest, ParsesLayerDotHead) {
  auto heads = ParseHeadList("5.1,5.5,0.11");
  ASSERT_TRUE(heads.ok());
  ASSERT_EQ(heads->size(), 3u);
  EXPECT_EQ((*heads)[2].layer, 0);
  EXPECT_EQ((*heads)[2].head, 11);
  for (const char* bad : {"", "5", "5.", ".1", "5.1.2", "a.b", "-1.2", "5.1,", "5 .1", "+5.1"}) {
    EXPECT_FALSE(ParseHeadList(bad).ok()) << bad;
  }
  EXPECT_NE(ParseHeadList("1.2,1.2").status().message().find("listed twice"), std::string::npos);
}

TEST(TopHeadsTest, HighestFirstTiesInLayerHeadOrder) {
  const analysis::HeadGrid grid = {{0.1, 0.9, NAN}, {0.5, 0.9, 0.2}};
  const std::vector<RankedHead> top = TopHeads(grid, 3);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].layer, 0);
  EXPECT_EQ(top[0].head, 1);
  EXPECT_EQ(top[1].layer, 1);
  EXPECT_EQ(top[1].head, 1);
  EXPECT_DOUBLE_EQ(top[2].score, 0.5);
  EXPECT_EQ(TopHeads(grid, 10).size(), 5u);  // NaN is never ranked
  EXPECT_TRUE(TopHeads(grid, 0).empty());
}

}  // namespace
}  // namespace attnscope::engine
