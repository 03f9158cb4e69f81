// Head scans and ablation on the hub-layout fixture (3 layers, 4 heads, 64
// positions: n = 20), checked against values computed here from full
// recordings of each probe sequence, and ablation against a modified
// checkpoint that switches the head off by other means.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "service/core/safetensors.h"
#include "service/engine/head_scan.h"
#include "service/model/language_model.h"
#include "service/model/recorder.h"
#include "tests/common/float_compare.h"

namespace attnscope::engine {
namespace {

using model::AblationMode;
using model::HeadRef;

constexpr int64_t kN = 20;

std::string HubDir() {
  return std::string(ATTNSCOPE_TEST_DATA_DIR) + "/models/gpt2-random-hub-layout";
}

const model::LanguageModel& Hub() {
  static auto* loaded = new absl::StatusOr<std::unique_ptr<model::LanguageModel>>(
      model::LoadLanguageModel(HubDir()));
  EXPECT_TRUE(loaded->ok()) << loaded->status();
  return ***loaded;
}

// Three random probe sequences inside the fixture's vocabulary of 1000 ids.
Probe HubProbe(int64_t sequences = 3, uint64_t seed = 11) {
  ProbeSpec spec;
  spec.n = kN;
  spec.num_sequences = sequences;
  spec.seed = seed;
  spec.min_id = 1;
  spec.max_id = 999;
  spec.bos_id = 0;
  auto probe = MakeRandomProbe(Hub().config(), spec);
  EXPECT_TRUE(probe.ok()) << probe.status();
  return *probe;
}

class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "head-scan-XXXXXX").string();
    path_ = mkdtemp(pattern.data());
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

model::FullRecorder Record(const std::vector<int64_t>& ids, bool hidden = false) {
  const model::ModelConfig& c = Hub().config();
  model::FullRecorder rec(c.num_layers, c.num_heads, {true, false, hidden, true});
  EXPECT_TRUE(Hub().Forward({ids}, {}, {&rec}).ok());
  return rec;
}

// -log softmax(row)[target], written out plainly.
double NegLogProb(const float* row, int64_t vocab, int64_t target) {
  double m = row[0], z = 0;
  for (int64_t v = 1; v < vocab; ++v) m = std::max(m, double{row[v]});
  for (int64_t v = 0; v < vocab; ++v) z += std::exp(row[v] - m);
  return std::log(z) - (row[target] - m);
}

// The scan's numbers from one recording per sequence (batch of one).
struct ReferenceScan {
  analysis::HeadGrid prev, induction, sink;
  double first = 0, second = 0;
};

ReferenceScan ComputeReference(const Probe& probe) {
  const int64_t L = Hub().config().num_layers, H = Hub().config().num_heads, T = 2 * kN + 1;
  const double S = static_cast<double>(probe.sequences.size());
  ReferenceScan r;
  r.prev = r.induction = r.sink = analysis::HeadGrid(L, std::vector<double>(H, 0.0));
  for (const std::vector<int64_t>& ids : probe.sequences) {
    const model::FullRecorder rec = Record(ids);
    for (int64_t l = 0; l < L; ++l) {
      for (int64_t h = 0; h < H; ++h) {
        const float* a = rec.attentions().data() + (l * H + h) * T * T;
        double prev = 0, induction = 0;
        for (int64_t i = 1; i < T; ++i) prev += a[i * T + i - 1] / double(T - 1);
        for (int64_t i = kN + 1; i <= 2 * kN; ++i) induction += a[i * T + i - kN + 1] / double(kN);
        r.prev[l][h] += prev / S;
        r.induction[l][h] += induction / S;
        r.sink[l][h] += a[(T - 1) * T] / S;
      }
    }
    const int64_t V = rec.vocab();
    for (int64_t p = 2; p <= kN; ++p) {
      r.first += NegLogProb(rec.logits().data() + (p - 1) * V, V, ids[p]) / (kN - 1) / S;
    }
    for (int64_t p = kN + 2; p <= 2 * kN; ++p) {
      r.second += NegLogProb(rec.logits().data() + (p - 1) * V, V, ids[p]) / (kN - 1) / S;
    }
  }
  return r;
}

// Largest |a - b| over two layer x head grids: +inf if shapes differ, NaN if
// any cell is NaN (so EXPECT_LT fails).
double GridDiff(const analysis::HeadGrid& a, const analysis::HeadGrid& b) {
  if (a.size() != b.size()) return test::kInf;
  double m = 0;
  for (size_t l = 0; l < a.size(); ++l) m = test::Worse(m, test::MaxAbsDiff(a[l], b[l]));
  return m;
}

TEST(HeadScanTest, ScoresAndLossesMatchPerSequenceRecordings) {
  const Probe probe = HubProbe();
  auto scan = ScanHeads(Hub(), probe);
  ASSERT_TRUE(scan.ok()) << scan.status();
  const ReferenceScan ref = ComputeReference(probe);
  EXPECT_EQ(scan->n, kN);
  EXPECT_EQ(scan->num_sequences, 3);
  EXPECT_LT(GridDiff(scan->prev_token, ref.prev), 1e-6);
  EXPECT_LT(GridDiff(scan->induction, ref.induction), 1e-6);
  EXPECT_LT(GridDiff(scan->sink, ref.sink), 1e-6);
  EXPECT_NEAR(scan->loss.first, ref.first, 1e-5);
  EXPECT_NEAR(scan->loss.second, ref.second, 1e-5);
  // A random model predicts nearly uniformly over its 1000 ids: about log 1000 = 6.9.
  EXPECT_NEAR(scan->loss.first, std::log(1000.0), 1.0);
}

TEST(HeadScanTest, QueryBlocksGiveTheSameScan) {
  const Probe probe = HubProbe(2);
  auto whole = ScanHeads(Hub(), probe, 0);
  auto blocks = ScanHeads(Hub(), probe, 7);
  ASSERT_TRUE(whole.ok() && blocks.ok());
  EXPECT_LT(GridDiff(whole->induction, blocks->induction), 1e-6);
  EXPECT_LT(GridDiff(whole->prev_token, blocks->prev_token), 1e-6);
  EXPECT_NEAR(whole->loss.second, blocks->loss.second, 1e-6);
}

TEST(HeadScanTest, HalfLossesOfHandMadeLogits) {
  // n = 2, T = 5, V = 3: first half is target 2 (row 1), second half target 4 (row 3).
  const std::vector<int64_t> ids = {0, 1, 2, 1, 2};
  std::vector<float> logits(5 * 3, 0.0f);
  logits[1 * 3 + 2] = 1000.0f;  // row 1 sure of id 2: loss ~0 (needs the max subtracted)
  logits[3 * 3 + 0] = 2.0f;     // row 3: target 2 has logit 0 against (2, 0, 0)
  logits[0 * 3 + 1] = 50.0f;    // rows 0, 2, 4 are not scored
  logits[2 * 3 + 0] = 50.0f;
  const HalfLosses loss = SequenceHalfLosses(logits.data(), 3, ids, 2);
  EXPECT_NEAR(loss.first, 0.0, 1e-12);
  EXPECT_NEAR(loss.second, std::log(std::exp(2.0) + 2.0), 1e-12);
}

std::vector<float> ToFloats(const TensorRef& t) { return *ToFloat32(t); }

// Copies the fixture into `dir` with head (l, h)'s value projection replaced:
// weights 0 and bias `bias`, so that every value vector of the head is `bias`.
void WriteWithConstantValues(const std::string& dir, int l, int h, const std::vector<float>& bias) {
  auto file = SafetensorsFile::Open(HubDir() + "/model.safetensors");
  ASSERT_TRUE(file.ok()) << file.status();
  const model::ModelConfig& c = Hub().config();
  const int64_t d = c.head_dim, D = c.hidden_size;
  const std::string prefix = "h." + std::to_string(l) + ".attn.c_attn.";
  std::vector<TensorToWrite> tensors;
  for (const TensorRef& t : (*file)->tensors()) {
    if (t.name == prefix + "weight") {
      std::vector<float> w = ToFloats(t);  // (D, 3D): x @ W, columns q | k | v
      for (int64_t row = 0; row < D; ++row) {
        for (int64_t col = 0; col < d; ++col) w[row * 3 * D + 2 * D + h * d + col] = 0.0f;
      }
      tensors.push_back(MakeF32Tensor(t.name, t.shape, w));
    } else if (t.name == prefix + "bias") {
      std::vector<float> b = ToFloats(t);
      for (int64_t col = 0; col < d; ++col) b[2 * D + h * d + col] = bias[col];
      tensors.push_back(MakeF32Tensor(t.name, t.shape, b));
    } else {
      tensors.push_back({t.name, t.dtype, t.shape,
                         std::string(reinterpret_cast<const char*>(t.data), t.nbytes)});
    }
  }
  ASSERT_TRUE(WriteSafetensors(dir + "/model.safetensors", tensors, (*file)->metadata()).ok());
  std::filesystem::copy_file(HubDir() + "/config.json", dir + "/config.json");
}

HalfLosses BaselineOf(const std::string& dir, const Probe& probe) {
  auto lm = model::LoadLanguageModel(dir);
  EXPECT_TRUE(lm.ok()) << lm.status();
  auto loss = ProbeLosses(**lm, probe, {}, AblationMode::kZero);
  EXPECT_TRUE(loss.ok()) << loss.status();
  return *loss;
}

// Mean over all positions and sequences of head (l, h)'s output
// o_i = sum_j A[i,j] v_j, with v_j = ln_1(X[l]_j) @ W_v + b_v, from the
// recorded attentions and layer input and the checkpoint's weights.
std::vector<float> MeanHeadOutput(const Probe& probe, int l, int h) {
  auto file = SafetensorsFile::Open(HubDir() + "/model.safetensors");
  const std::string p = "h." + std::to_string(l) + ".";
  const std::vector<float> w = ToFloats(*(*file)->Find(p + "attn.c_attn.weight"));
  const std::vector<float> b = ToFloats(*(*file)->Find(p + "attn.c_attn.bias"));
  const std::vector<float> g = ToFloats(*(*file)->Find(p + "ln_1.weight"));
  const std::vector<float> beta = ToFloats(*(*file)->Find(p + "ln_1.bias"));
  const model::ModelConfig& c = Hub().config();
  const int64_t D = c.hidden_size, d = c.head_dim, H = c.num_heads, T = 2 * kN + 1;
  std::vector<double> sum(d, 0.0);
  for (const std::vector<int64_t>& ids : probe.sequences) {
    const model::FullRecorder rec = Record(ids, /*hidden=*/true);
    std::vector<std::vector<double>> v(T, std::vector<double>(d, 0.0));
    for (int64_t j = 0; j < T; ++j) {
      const float* x = rec.hidden_states().data() + (l * T + j) * D;
      double mean = 0, var = 0;
      for (int64_t k = 0; k < D; ++k) mean += x[k] / double(D);
      for (int64_t k = 0; k < D; ++k) var += (x[k] - mean) * (x[k] - mean) / double(D);
      for (int64_t k = 0; k < D; ++k) {
        const double n = (x[k] - mean) / std::sqrt(var + c.decoder.norm_eps) * g[k] + beta[k];
        for (int64_t col = 0; col < d; ++col) v[j][col] += n * w[k * 3 * D + 2 * D + h * d + col];
      }
      for (int64_t col = 0; col < d; ++col) v[j][col] += b[2 * D + h * d + col];
    }
    const float* a = rec.attentions().data() + (l * H + h) * T * T;
    for (int64_t i = 0; i < T; ++i) {
      for (int64_t j = 0; j <= i; ++j) {
        for (int64_t col = 0; col < d; ++col) sum[col] += a[i * T + j] * v[j][col];
      }
    }
  }
  std::vector<float> mean(d);
  for (int64_t col = 0; col < d; ++col) mean[col] = sum[col] / double(T * probe.sequences.size());
  return mean;
}

TEST(AblationTest, ZeroAblationEqualsACheckpointWithoutTheHeadsValues) {
  const Probe probe = HubProbe();
  auto ablated = ProbeLosses(Hub(), probe, {{1, 2}}, AblationMode::kZero);
  auto baseline = ProbeLosses(Hub(), probe, {}, AblationMode::kZero);
  ASSERT_TRUE(ablated.ok() && baseline.ok());
  ScratchDir dir;
  WriteWithConstantValues(dir.path(), 1, 2, std::vector<float>(Hub().config().head_dim, 0.0f));
  const HalfLosses reference = BaselineOf(dir.path(), probe);
  EXPECT_NEAR(ablated->first, reference.first, 1e-5);
  EXPECT_NEAR(ablated->second, reference.second, 1e-5);
  EXPECT_GT(std::fabs(ablated->first - baseline->first), 1e-3) << "the head changes nothing";
}

TEST(AblationTest, MeanAblationUsesTheMeanOverTheWholeBatch) {
  const Probe probe = HubProbe();
  auto ablated = ProbeLosses(Hub(), probe, {{1, 2}}, AblationMode::kMean);
  auto zero = ProbeLosses(Hub(), probe, {{1, 2}}, AblationMode::kZero);
  ASSERT_TRUE(ablated.ok() && zero.ok());
  ScratchDir dir;
  WriteWithConstantValues(dir.path(), 1, 2, MeanHeadOutput(probe, 1, 2));
  const HalfLosses reference = BaselineOf(dir.path(), probe);
  EXPECT_NEAR(ablated->first, reference.first, 1e-5);
  EXPECT_NEAR(ablated->second, reference.second, 1e-5);
  EXPECT_GT(std::fabs(ablated->first - zero->first), 1e-3) << "mean and zero agree: vacuous";

  // Each sequence alone (its own mean) gives other numbers: the batch matters.
  double per_sequence_first = 0;
  for (const std::vector<int64_t>& ids : probe.sequences) {
    auto one = ProbeLosses(Hub(), Probe{kN, {ids}}, {{1, 2}}, AblationMode::kMean);
    ASSERT_TRUE(one.ok());
    per_sequence_first += one->first / probe.sequences.size();
  }
  EXPECT_GT(std::fabs(per_sequence_first - ablated->first), 1e-4);
}

TEST(AblationTest, MeanOverIdenticalSequencesEqualsThePerSequenceMean) {
  const std::vector<int64_t> ids = HubProbe(1).sequences[0];
  std::vector<HeadRef> layer;
  for (int h = 0; h < Hub().config().num_heads; ++h) layer.push_back({1, h});
  auto batch = ProbeLosses(Hub(), Probe{kN, {ids, ids, ids}}, layer, AblationMode::kMean);
  auto alone = ProbeLosses(Hub(), Probe{kN, {ids}}, layer, AblationMode::kMean);
  ASSERT_TRUE(batch.ok() && alone.ok());
  EXPECT_NEAR(batch->first, alone->first, 1e-6);
  EXPECT_NEAR(batch->second, alone->second, 1e-6);
}

TEST(AblationTest, AHeadListedTwiceIsAblatedOnce) {
  const Probe probe = HubProbe(2);
  for (AblationMode mode : {AblationMode::kZero, AblationMode::kMean}) {
    auto once = ProbeLosses(Hub(), probe, {{2, 3}}, mode);
    auto twice = ProbeLosses(Hub(), probe, {{2, 3}, {2, 3}}, mode);
    ASSERT_TRUE(once.ok() && twice.ok());
    EXPECT_NEAR(once->first, twice->first, 1e-6);
    EXPECT_NEAR(once->second, twice->second, 1e-6);
  }
}

TEST(AblationTest, TableHasBaselineEachHeadThenAll) {
  const Probe probe = HubProbe(2);
  auto rows = AblationTable(Hub(), probe, {{0, 1}, {2, 3}}, AblationMode::kZero);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 4u);
  EXPECT_TRUE((*rows)[0].heads.empty());
  EXPECT_EQ(HeadName((*rows)[1].heads.at(0)), "0.1");
  EXPECT_EQ(HeadName((*rows)[2].heads.at(0)), "2.3");
  EXPECT_EQ((*rows)[3].heads.size(), 2u);
  auto scan = ScanHeads(Hub(), probe);
  ASSERT_TRUE(scan.ok());
  EXPECT_NEAR((*rows)[0].loss.first, scan->loss.first, 1e-9);
  auto both = ProbeLosses(Hub(), probe, {{0, 1}, {2, 3}}, AblationMode::kZero);
  EXPECT_NEAR((*rows)[3].loss.second, both->second, 1e-9);
  // One head: no "all together" row.
  auto single = AblationTable(Hub(), probe, {{0, 1}}, AblationMode::kZero);
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(single->size(), 2u);
}

TEST(AblationTest, HeadsOutsideTheModelNameTheLimits) {
  const absl::Status s = CheckHeads(Hub().config(), {{1, 1}, {3, 0}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "head 3.0 does not exist: the model has layers 0..2 and heads 0..3");
  EXPECT_FALSE(ProbeLosses(Hub(), HubProbe(1), {{0, 4}}, AblationMode::kZero).ok());
  EXPECT_FALSE(AblationTable(Hub(), HubProbe(1), {}, AblationMode::kZero).ok());
}

}  // namespace
}  // namespace attnscope::engine
