#include "tests/reference/reference_forward.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "service/model/forward_observer.h"
#include "service/model/language_model.h"

namespace attnscope::reference {
namespace {

// Keeps attentions, hidden states and logits of sequence 0 in reference layout.
class Keeper : public model::ForwardObserver {
 public:
  Keeper(int64_t layers, int64_t heads) : layers_(layers), heads_(heads) {}
  model::ObserverNeeds Needs() const override { return {true, false, true, true}; }
  void OnBegin(int, int64_t num_tokens) override {
    t_ = num_tokens;
    out_.attentions.assign(layers_ * heads_ * t_ * t_, 0.0f);
  }
  void OnHiddenState(int, int state, const float* x, int64_t num_tokens, int64_t width) override {
    const size_t n = num_tokens * width;
    if (out_.hidden_states.size() < (state + 1) * n) out_.hidden_states.resize((state + 1) * n);
    std::memcpy(out_.hidden_states.data() + state * n, x, n * sizeof(float));
  }
  void OnAttention(const model::AttentionBlock& b) override {
    const int64_t rows = b.query_end - b.query_begin;
    for (int64_t h = 0; h < b.num_heads; ++h) {
      for (int64_t r = 0; r < rows; ++r) {
        float* dst = out_.attentions.data() + ((b.layer * heads_ + h) * t_ + b.query_begin + r) * t_;
        std::memcpy(dst, b.probs + (h * rows + r) * b.num_keys, b.num_keys * sizeof(float));
      }
    }
  }
  void OnLogits(int, const float* logits, int64_t num_tokens, int64_t vocab) override {
    out_.logits.assign(logits, logits + num_tokens * vocab);
    out_.vocab = vocab;
  }
  ForwardOutput Take() { return std::move(out_); }

 private:
  int64_t layers_, heads_, t_ = 0;
  ForwardOutput out_;
};

std::vector<float> FloatsOrEmpty(const SafetensorsFile& f, const std::string& name) {
  const TensorRef* t = f.Find(name);
  if (t == nullptr) return {};
  auto v = ToFloat32(*t);
  return v.ok() ? *std::move(v) : std::vector<float>{};
}

}  // namespace

std::vector<float> ForwardOutput::LastLogits() const {
  if (vocab == 0 || logits.size() < static_cast<size_t>(vocab)) return {};
  return std::vector<float>(logits.end() - vocab, logits.end());
}

absl::StatusOr<ForwardOutput> RunForward(const std::string& dir, const std::vector<int64_t>& ids) {
  auto model = model::LoadLanguageModel(dir);
  if (!model.ok()) return model.status();
  Keeper keeper((*model)->config().num_layers, (*model)->config().num_heads);
  if (absl::Status s = (*model)->Forward({ids}, {}, {&keeper}); !s.ok()) return s;
  return keeper.Take();
}

absl::StatusOr<ReferenceTensors> LoadReferenceTensors(const std::string& file,
                                                      const std::string& prefix) {
  auto f = SafetensorsFile::Open(file);
  if (!f.ok()) return f.status();
  ReferenceTensors r;
  const TensorRef* ids = (*f)->Find(prefix + "input_ids");
  if (ids == nullptr) {
    return absl::NotFoundError(absl::StrCat(file, ": no tensor ", prefix, "input_ids"));
  }
  auto ids64 = ToInt64(*ids);
  if (!ids64.ok()) return ids64.status();
  r.input_ids = *std::move(ids64);
  r.attentions = FloatsOrEmpty(**f, prefix + "attentions");
  r.hidden_states = FloatsOrEmpty(**f, prefix + "hidden_states");
  r.logits = FloatsOrEmpty(**f, prefix + "logits");
  r.logits_last = FloatsOrEmpty(**f, prefix + "logits_last");
  return r;
}

std::string TestData(const std::string& relative) {
  return std::string(ATTNSCOPE_TEST_DATA_DIR) + "/" + relative;
}

std::string BundledModelDir() { return std::string(ATTNSCOPE_MODELS_DIR) + "/tiny-gpt2"; }

}  // namespace attnscope::reference
