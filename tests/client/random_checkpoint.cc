#include "tests/client/random_checkpoint.h"

#include <QDir>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "service/core/safetensors.h"

namespace attnscope::dashboard::testing {
namespace {

using attnscope::TensorToWrite;

class Tensors {
 public:
  explicit Tensors(unsigned seed) : m_rng(seed) {}

  void normal(const std::string& name, std::vector<int64_t> shape, double stddev) {
    std::normal_distribution<float> draw(0.0f, static_cast<float>(stddev));
    std::vector<float> values(count(shape));
    for (float& v : values) v = draw(m_rng);
    m_tensors.push_back(attnscope::MakeF32Tensor(name, std::move(shape), values));
  }

  void constant(const std::string& name, std::vector<int64_t> shape, float value) {
    std::vector<float> values(count(shape), value);
    m_tensors.push_back(attnscope::MakeF32Tensor(name, std::move(shape), values));
  }

  // c_attn (D, 3D): columns q | k | v; q and k drawn with `qk`, v with `v`.
  void attention(const std::string& name, int64_t width, double qk, double v) {
    std::normal_distribution<float> sharp(0.0f, static_cast<float>(qk));
    std::normal_distribution<float> plain(0.0f, static_cast<float>(v));
    std::vector<float> values(static_cast<size_t>(width * 3 * width));
    for (int64_t row = 0; row < width; ++row) {
      for (int64_t col = 0; col < 3 * width; ++col) {
        values[row * 3 * width + col] = col < 2 * width ? sharp(m_rng) : plain(m_rng);
      }
    }
    m_tensors.push_back(attnscope::MakeF32Tensor(name, {width, 3 * width}, values));
  }

  const std::vector<TensorToWrite>& all() const { return m_tensors; }

 private:
  static size_t count(const std::vector<int64_t>& shape) {
    int64_t n = 1;
    for (const int64_t d : shape) n *= d;
    return static_cast<size_t>(n);
  }

  std::mt19937 m_rng;
  std::vector<TensorToWrite> m_tensors;
};

QString writeConfig(const QString& dir, const RandomGpt2& s) {
  QFile bundled(QStringLiteral(ATTNSCOPE_MODELS_DIR "/tiny-gpt2/config.json"));
  if (!bundled.open(QIODevice::ReadOnly))
    return QStringLiteral("cannot read ") + bundled.fileName();
  QJsonObject config = QJsonDocument::fromJson(bundled.readAll()).object();
  config[QStringLiteral("n_layer")] = s.layers;
  config[QStringLiteral("n_head")] = s.heads;
  config[QStringLiteral("n_embd")] = s.width;
  config[QStringLiteral("n_positions")] = s.positions;
  config[QStringLiteral("n_ctx")] = s.positions;
  config[QStringLiteral("torch_dtype")] = QStringLiteral("float32");
  QFile out(dir + QStringLiteral("/config.json"));
  if (!out.open(QIODevice::WriteOnly)) return QStringLiteral("cannot write ") + out.fileName();
  out.write(QJsonDocument(config).toJson());
  return QString();
}

}  // namespace

QString writeRandomGpt2(const QString& dir, const RandomGpt2& s) {
  if (s.width % s.heads != 0) return QStringLiteral("width must be a multiple of heads");
  const QDir bundled(QStringLiteral(ATTNSCOPE_MODELS_DIR "/tiny-gpt2"));
  for (const char* name :
       {"vocab.json", "merges.txt", "tokenizer_config.json", "generation_config.json"}) {
    const QString target = dir + QLatin1Char('/') + QLatin1String(name);
    QFile::remove(target);
    if (!QFile::copy(bundled.filePath(QLatin1String(name)), target)) {
      return QStringLiteral("cannot copy %1 into %2").arg(QLatin1String(name), dir);
    }
  }
  if (const QString problem = writeConfig(dir, s); !problem.isEmpty()) return problem;
  const int64_t d = s.width;
  constexpr int64_t kVocab = 50257;
  Tensors t(s.seed);
  const std::string p = "transformer.";
  t.normal(p + "wte.weight", {kVocab, d}, 0.5);
  t.normal(p + "wpe.weight", {s.positions, d}, 0.1);
  for (int l = 0; l < s.layers; ++l) {
    const std::string h = p + "h." + std::to_string(l) + ".";
    t.constant(h + "ln_1.weight", {d}, 1.0f);
    t.constant(h + "ln_1.bias", {d}, 0.0f);
    t.attention(h + "attn.c_attn.weight", d, 0.6, 0.2);
    t.normal(h + "attn.c_attn.bias", {3 * d}, 0.1);
    t.normal(h + "attn.c_proj.weight", {d, d}, 0.1);
    t.constant(h + "attn.c_proj.bias", {d}, 0.0f);
    t.constant(h + "ln_2.weight", {d}, 1.0f);
    t.constant(h + "ln_2.bias", {d}, 0.0f);
    t.normal(h + "mlp.c_fc.weight", {d, 4 * d}, 0.1);
    t.constant(h + "mlp.c_fc.bias", {4 * d}, 0.0f);
    t.normal(h + "mlp.c_proj.weight", {4 * d, d}, 0.1);
    t.constant(h + "mlp.c_proj.bias", {d}, 0.0f);
  }
  t.constant(p + "ln_f.weight", {d}, 1.0f);
  t.constant(p + "ln_f.bias", {d}, 0.0f);
  const absl::Status written = attnscope::WriteSafetensors(
      (dir + QStringLiteral("/model.safetensors")).toStdString(), t.all(), {{"format", "pt"}});
  return written.ok() ? QString() : QString::fromStdString(written.ToString());
}

}  // namespace attnscope::dashboard::testing
