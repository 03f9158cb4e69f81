#include "tests/reference/reference_forward.h"

#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "service/core/dtype.h"
#include "service/model/forward_observer.h"
#include "service/model/language_model.h"

namespace attnscope::reference {
namespace {

namespace fs = std::filesystem;

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

absl::StatusOr<nlohmann::json> ReadJsonFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(path, ": not JSON"));
  return j;
}

absl::Status WriteJsonFile(const std::string& path, const nlohmann::json& j) {
  std::ofstream out(path, std::ios::trunc);
  out << j.dump(2);
  return out ? absl::OkStatus() : absl::InternalError(absl::StrCat("cannot write ", path));
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

ScratchDir::ScratchDir() {
  static std::atomic<int> counter{0};
  std::random_device random;
  path_ = (fs::temp_directory_path() /
           absl::StrCat("attnscope-reference-", getpid(), "-", counter++, "-", random()))
              .string();
  fs::create_directories(path_);
}

ScratchDir::~ScratchDir() {
  std::error_code ignored;
  fs::remove_all(path_, ignored);
}

absl::Status CopyWithConfig(const std::string& from, const std::string& to,
                            const std::map<std::string, std::string>& overrides) {
  std::error_code error;
  fs::create_directories(to, error);
  for (const auto& entry : fs::directory_iterator(from)) {
    if (entry.path().filename() == "config.json") continue;
    fs::copy_file(entry.path(), fs::path(to) / entry.path().filename(),
                  fs::copy_options::overwrite_existing, error);
    if (error) return absl::InternalError(absl::StrCat("copy ", entry.path().string(), ": ",
                                                       error.message()));
  }
  auto config = ReadJsonFile(from + "/config.json");
  if (!config.ok()) return config.status();
  for (const auto& [key, value] : overrides) (*config)[key] = nlohmann::json::parse(value);
  return WriteJsonFile(to + "/config.json", *config);
}

uint16_t FloatToBFloat16(float value) {
  uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0) {
    return static_cast<uint16_t>((bits >> 16) | 0x40);  // quiet NaN stays NaN
  }
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

absl::Status WriteRoundedCopy(const std::string& from, const std::string& to, bool bf16) {
  auto file = SafetensorsFile::Open(from + "/model.safetensors");
  if (!file.ok()) return file.status();
  std::vector<TensorToWrite> out;
  for (const TensorRef& t : (*file)->tensors()) {
    auto values = ToFloat32(t);
    if (!values.ok()) {  // integer tensors are copied as they are
      out.push_back({t.name, t.dtype, t.shape,
                     std::string(reinterpret_cast<const char*>(t.data), t.nbytes)});
      continue;
    }
    std::vector<uint16_t> halves(values->size());
    for (size_t i = 0; i < halves.size(); ++i) halves[i] = FloatToBFloat16((*values)[i]);
    if (bf16) {
      out.push_back({t.name, DType::kBF16, t.shape,
                     std::string(reinterpret_cast<const char*>(halves.data()), halves.size() * 2)});
    } else {
      for (size_t i = 0; i < halves.size(); ++i) (*values)[i] = BFloat16ToFloat(halves[i]);
      out.push_back(MakeF32Tensor(t.name, t.shape, *values));
    }
  }
  std::error_code error;
  fs::create_directories(to, error);
  if (absl::Status s = WriteSafetensors(to + "/model.safetensors", out); !s.ok()) return s;
  auto config = ReadJsonFile(from + "/config.json");
  if (!config.ok()) return config.status();
  (*config)["torch_dtype"] = bf16 ? "bfloat16" : "float32";
  return WriteJsonFile(to + "/config.json", *config);
}

}  // namespace attnscope::reference
