// attnscope analyze on every decoder family fixture, end to end: --export
// writes Hugging Face's tensors, --json reproduces stats.json; and OPT with
// project_out exports its narrower last hidden state exactly.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include "nlohmann/json.hpp"
#include "service/core/safetensors.h"
#include "tests/cli/cli_fixtures.h"
#include "tests/cli/run_cli.h"
#include "tests/common/float_compare.h"
#include "tests/common/temp_path.h"

namespace attnscope {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;
using testing::CliResult;
using testing::RunCli;
using testing::RunCliOnTerminal;
using testing::Fixture;
using testing::Floats;
using testing::IdsArg;
using testing::ReadJson;


// Largest difference between the numbers of two JSON values of the same
// shape (every key of `b` must be in `a`): +inf when shapes or non-numeric
// values differ, NaN when a number is NaN or either side is `null` (how the
// CLI writes a non-finite statistic), so `diff <= tol` fails on it.
double JsonDiff(const json& a, const json& b) {
  if (a.is_null() || b.is_null()) return test::kNaN;
  if (a.is_number() && b.is_number()) return test::AbsDiff(a.get<double>(), b.get<double>());
  if (a.is_array() && b.is_array()) {
    if (a.size() != b.size()) return test::kInf;
    double worst = 0;
    for (size_t i = 0; i < a.size(); ++i) worst = test::Worse(worst, JsonDiff(a[i], b[i]));
    return worst;
  }
  if (a.is_object() && b.is_object()) {
    double worst = 0;
    for (auto it = b.begin(); it != b.end(); ++it) {
      if (!a.contains(it.key())) return test::kInf;
      worst = test::Worse(worst, JsonDiff(a[it.key()], it.value()));
    }
    return worst;
  }
  return a == b ? 0 : test::kInf;  // strings, booleans: equal or not (null is handled above)
}

class FamilyCliTest : public ::testing::TestWithParam<const char*> {
 protected:
  std::string dir() const { return Fixture(GetParam()); }
  json stats() const { return ReadJson(dir() + "/stats.json"); }
};

TEST_P(FamilyCliTest, ExportWritesHuggingFacesTensors) {
  const std::string out =
      test::UniqueTempPath(std::string("family-export-") + GetParam() + ".safetensors");
  auto r = RunCli({"analyze", "--model", dir(), "--ids", IdsArg(stats()["input_ids"]), "--export",
                   out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto mine = SafetensorsFile::Open(out);
  auto ref = SafetensorsFile::Open(dir() + "/reference.safetensors");
  ASSERT_TRUE(mine.ok() && ref.ok());
  for (const char* name : {"input_ids", "attentions", "hidden_states", "logits"}) {
    ASSERT_NE((*mine)->Find(name), nullptr) << name;
    EXPECT_EQ((*mine)->Find(name)->shape, (*ref)->Find(name)->shape) << name;
  }
  EXPECT_EQ(*ToInt64(*(*mine)->Find("input_ids")), *ToInt64(*(*ref)->Find("input_ids")));
  // NaN anywhere, or a size mismatch (+inf), fails the checks below.
  const double att = test::MaxAbsDiff(Floats(**mine, "attentions"), Floats(**ref, "attentions"));
  const double hid = test::MaxAbsDiff(Floats(**mine, "hidden_states"), Floats(**ref, "hidden_states"));
  const double log = test::MaxAbsDiff(Floats(**mine, "logits"), Floats(**ref, "logits"));
  std::printf("%s: attentions %.3g hidden %.3g logits %.3g\n", GetParam(), att, hid, log);
  EXPECT_LE(att, 1e-5);
  EXPECT_LE(hid, 1e-4);
  EXPECT_LE(log, 1e-4);
  std::remove(out.c_str());
}

TEST_P(FamilyCliTest, JsonMatchesStatsInFullAndBlockwiseMode) {
  const json expected = stats();
  for (const char* block : {"0", "5"}) {
    auto r = RunCli({"analyze", "--model", dir(), "--ids", IdsArg(expected["input_ids"]),
                     "--template", "none", "--json", "--block-size", block});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json got = json::parse(r.out);
    double worst = 0;
    for (auto it = expected.begin(); it != expected.end(); ++it) {
      ASSERT_TRUE(got.contains(it.key())) << it.key();
      // The trained TinyStories model's activations grow to ~12 by the last
      // layer and float32 rounding with them (relative 3e-6, logits 7e-5 off
      // its PyTorch reference): its statistics are held to 1e-4.
      const bool trained = std::string(GetParam()) == "llama-stories260K";
      // Next-token entropy of qwen3's random fixture (vocabulary 256, about
      // 5 nats) comes from logits that are up to 1.5e-5 (1.7e-6 relative)
      // off Hugging Face's float32 ones, hidden states 5.7e-6 before the head
      // (measured with --export); with float32 attention (issue 10) it
      // measured 9.1e-6 whole-layer and 1.07e-5 block-wise: float32 rounding
      // of a sum over the vocabulary, held to 2e-5 absolute (4e-6 relative).
      const bool wide_entropy =
          std::string(GetParam()) == "qwen3" && it.key() == "next_token_entropy_nats";
      const double tolerance =
          it.key() == "z" || trained ? 1e-4 : (wide_entropy ? 2e-5 : 1e-5);
      const double diff = JsonDiff(got[it.key()], it.value());
      EXPECT_LE(diff, tolerance) << it.key() << " block " << block;
      if (it.key() != "z") worst = test::Worse(worst, diff);
    }
    std::printf("%s block %s: largest statistic difference %.3g\n", GetParam(), block, worst);
  }
}

INSTANTIATE_TEST_SUITE_P(Families, FamilyCliTest,
                         ::testing::Values("llama", "mistral", "qwen2", "qwen3", "gemma2", "phi3",
                                           "gpt_neox", "opt", "llama-stories260K"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

// On a terminal (a pseudo-terminal from util-linux's script) loading draws a
// progress line on stderr; through a pipe it stays silent.
// analyze shows the pass's progress on a terminal (layer i/N, tokens,
// elapsed, ETA) and clears the line; piped, stderr stays empty of it.
TEST(FamiliesCliTest, AnalyzeShowsLayerProgressOnlyOnATerminal) {
  const CliResult terminal = RunCliOnTerminal("analyze --ids 464,3797,3332,319,262,2603");
  ASSERT_EQ(terminal.exit_code, 0) << terminal.out;
  EXPECT_THAT(terminal.out, HasSubstr("analyze: layer 1/6  "));
  EXPECT_THAT(terminal.out, HasSubstr("analyze: layer 6/6  "));
  EXPECT_THAT(terminal.out, HasSubstr("  6 tokens  "));
  EXPECT_THAT(terminal.out, HasSubstr("ETA 0.0 s"));
  EXPECT_THAT(terminal.out, HasSubstr("Context health"));
  const CliResult piped = RunCli({"analyze", "--ids", "464,3797,3332,319,262,2603"});
  ASSERT_EQ(piped.exit_code, 0) << piped.err;
  EXPECT_THAT(piped.err, ::testing::Not(HasSubstr("layer")));
}

// Loading the weights shows its progress on a terminal (`models` loads none).
TEST(LoadProgressCliTest, ProgressLineOnlyOnATerminal) {
  const CliResult run = RunCliOnTerminal("analyze --model " + Fixture("llama") + " --ids 1,2,3");
  const std::string& terminal = run.out;
  ASSERT_EQ(run.exit_code, 0) << terminal;
  EXPECT_NE(terminal.find("\rloading " + Fixture("llama") + ": 100% of 0.53 MiB"),
            std::string::npos)
      << terminal;
  EXPECT_NE(terminal.find("Context health"), std::string::npos) << terminal;
  auto piped = RunCli({"analyze", "--model", Fixture("llama"), "--ids", "1,2,3"});
  ASSERT_EQ(piped.exit_code, 0) << piped.err;
  EXPECT_EQ(piped.err.find("loading"), std::string::npos) << piped.err;
}

// Deterministic values in [-0.5, 0.5).
std::vector<float> Pseudorandom(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  for (float& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<float>(seed >> 8) / static_cast<float>(1u << 24) - 0.5f;
  }
  return v;
}

// The OPT fixture turned into an OPT-350m-shaped model: a 32-wide embedding
// projected in to the 64-wide layers and out again before the tied head.
TEST(OptProjectionCliTest, ExportHoldsTheNarrowLastStateExactlyAndPadded) {
  const std::filesystem::path dir = test::UniqueTempPath("opt-projected");
  std::filesystem::create_directories(dir);
  json config = ReadJson(Fixture("opt") + "/config.json");
  config["word_embed_proj_dim"] = 32;
  std::ofstream(dir / "config.json") << config.dump();
  auto fixture = SafetensorsFile::Open(Fixture("opt") + "/model.safetensors");
  ASSERT_TRUE(fixture.ok());
  std::vector<TensorToWrite> tensors;
  const int64_t v = 256, e = 32, h = 64;
  const std::vector<float> embed = Pseudorandom(v * e, 1);
  for (const TensorRef& t : (*fixture)->tensors()) {
    if (t.name == "model.decoder.embed_tokens.weight" || t.name == "lm_head.weight") continue;
    tensors.push_back(MakeF32Tensor(t.name, t.shape, *ToFloat32(t)));
  }
  tensors.push_back(MakeF32Tensor("model.decoder.embed_tokens.weight", {v, e}, embed));
  tensors.push_back(MakeF32Tensor("model.decoder.project_in.weight", {h, e}, Pseudorandom(h * e, 2)));
  tensors.push_back(MakeF32Tensor("model.decoder.project_out.weight", {e, h}, Pseudorandom(e * h, 3)));
  ASSERT_TRUE(WriteSafetensors((dir / "model.safetensors").string(), tensors).ok());

  const std::string out = (dir / "export.safetensors").string();
  auto r = RunCli({"analyze", "--model", dir.string(), "--ids", "2,7,100,31,5,250", "--export", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto mine = SafetensorsFile::Open(out);
  ASSERT_TRUE(mine.ok()) << mine.status();
  const TensorRef* final_state = (*mine)->Find("hidden_states_final");
  ASSERT_NE(final_state, nullptr);
  const int64_t t = 6, layers = 3;
  EXPECT_EQ(final_state->shape, (std::vector<int64_t>{t, e}));
  EXPECT_EQ((*mine)->Find("hidden_states")->shape, (std::vector<int64_t>{layers + 1, t, h}));
  const std::vector<float> last = *ToFloat32(*final_state);
  const std::vector<float> states = Floats(**mine, "hidden_states");
  const std::vector<float> logits = Floats(**mine, "logits");
  double pad = 0, copy = 0, head = 0;
  for (int64_t i = 0; i < t; ++i) {
    const float* row = states.data() + (layers * t + i) * h;
    for (int64_t k = 0; k < h; ++k) {
      if (k < e) {
        copy = test::Worse(copy, test::AbsDiff(row[k], last[i * e + k]));
      } else {
        pad = test::Worse(pad, test::AbsDiff(row[k], 0.0));
      }
    }
    // The tied head reads the projected-out state.
    for (int64_t w = 0; w < v; ++w) {
      double dot = 0;
      for (int64_t k = 0; k < e; ++k) dot += double(last[i * e + k]) * embed[w * e + k];
      head = test::Worse(head, test::AbsDiff(dot, logits[i * v + w]));
    }
  }
  EXPECT_EQ(copy, 0.0);
  EXPECT_EQ(pad, 0.0);
  EXPECT_LE(head, 1e-4);
}

}  // namespace
}  // namespace attnscope
