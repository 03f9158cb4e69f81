#include "client/models/prompt_analysis.h"

#include <cmath>

namespace attnscope::dashboard {
namespace {

namespace v1 = attnscope::v1;

// Checks that `values` has 0 or `expected` entries, all finite.
template <typename Repeated>
QString checkArray(const char* field, const Repeated& values, int expected) {
  if (values.size() != 0 && values.size() != expected) {
    return QStringLiteral("%1 has %2 values, expected %3")
        .arg(QLatin1String(field))
        .arg(values.size())
        .arg(expected);
  }
  for (const double v : values) {
    if (!std::isfinite(v))
      return QStringLiteral("%1 has a non-finite value").arg(QLatin1String(field));
  }
  return QString();
}

QString checkLayerArrays(const v1::LayerStats& layer, int heads, int tokens) {
  QString problem = checkArray("sink_score", layer.sink_score(), heads);
  if (problem.isEmpty()) problem = checkArray("first_token_mass", layer.first_token_mass(), heads);
  if (problem.isEmpty())
    problem = checkArray("attention_entropy", layer.attention_entropy(), heads);
  if (problem.isEmpty()) problem = checkArray("prev_token_score", layer.prev_token_score(), heads);
  if (problem.isEmpty()) {
    problem = checkArray("value_weighted_first_token_share",
                         layer.value_weighted_first_token_share(), heads);
  }
  if (problem.isEmpty())
    problem = checkArray("hidden_state_norms", layer.hidden_state_norms(), tokens);
  return problem;
}

QString checkPositions(const char* field, const google::protobuf::RepeatedField<int64_t>& values,
                       int tokens) {
  for (const int64_t p : values) {
    if (p < 0 || p >= tokens) {
      return QStringLiteral("%1 position %2 outside [0, %3)")
          .arg(QLatin1String(field))
          .arg(p)
          .arg(tokens);
    }
  }
  return QString();
}

QString checkSummary(const v1::Summary& s, int tokens) {
  if (!std::isfinite(s.health()) || s.health() < 0.0 || s.health() > 10.0) {
    return QStringLiteral("health %1 outside 0..10").arg(s.health());
  }
  for (const v1::Sink& sink : s.sinks()) {
    if (sink.position() < 0 || sink.position() >= tokens) {
      return QStringLiteral("sink position %1 outside [0, %2)").arg(sink.position()).arg(tokens);
    }
    if (!std::isfinite(sink.z())) return QStringLiteral("sink z is not finite");
  }
  QString problem = checkPositions("structural", s.structural(), tokens);
  if (problem.isEmpty()) problem = checkArray("received", s.received(), tokens);
  if (problem.isEmpty()) problem = checkArray("z", s.z(), tokens);
  if (problem.isEmpty()) problem = checkArray("max_norm", s.max_norm(), tokens);
  if (problem.isEmpty()) problem = checkArray("embedding_norms", s.embedding_norms(), tokens);
  if (problem.isEmpty()) {
    problem = checkArray("next_token_entropy_nats", s.next_token_entropy_nats(), tokens);
  }
  if (problem.isEmpty()) {
    problem =
        checkArray("next_token_entropy_normalized", s.next_token_entropy_normalized(), tokens);
  }
  return problem;
}

QString eventName(const v1::AnalyzeEvent& event) {
  switch (event.event_case()) {
    case v1::AnalyzeEvent::kTokens:
      return QStringLiteral("tokens");
    case v1::AnalyzeEvent::kLayer:
      return QStringLiteral("layer %1").arg(event.layer().layer());
    case v1::AnalyzeEvent::kAttention:
      return QStringLiteral("attention (layer %1, head %2)")
          .arg(event.attention().layer())
          .arg(event.attention().head());
    case v1::AnalyzeEvent::kSummary:
      return QStringLiteral("summary");
    case v1::AnalyzeEvent::EVENT_NOT_SET:
      break;
  }
  return QStringLiteral("empty event");
}

}  // namespace

PromptAnalysis::PromptAnalysis(QObject* parent) : QObject(parent) {}

PromptAnalysis::~PromptAnalysis() = default;

void PromptAnalysis::reset(const QString& promptText, const QString& model) {
  m_promptText = promptText;
  m_model = model;
  m_errors.clear();
  m_failure.clear();
  m_hasTokens = false;
  m_tokens.clear();
  m_heads = 0;
  m_layers.clear();
  m_pending.clear();
  m_attention.clear();
  m_summary.reset();
  Q_EMIT cleared();
}

bool PromptAnalysis::reject(const QString& message, QString* error) {
  m_errors.append(message);
  if (error != nullptr) *error = message;
  Q_EMIT rejected(message);
  return false;
}

bool PromptAnalysis::addEvent(const v1::AnalyzeEvent& event, QString* error) {
  if (event.event_case() == v1::AnalyzeEvent::EVENT_NOT_SET) {
    return reject(QStringLiteral("analyze event has no payload"), error);
  }
  if (m_summary.has_value()) {
    return reject(eventName(event) + QStringLiteral(": arrived after the summary"), error);
  }
  if (event.event_case() != v1::AnalyzeEvent::kTokens && !m_hasTokens) {
    return reject(eventName(event) + QStringLiteral(": arrived before the tokens"), error);
  }
  switch (event.event_case()) {
    case v1::AnalyzeEvent::kTokens:
      return addTokens(event.tokens(), error);
    case v1::AnalyzeEvent::kLayer:
      return addLayer(event.layer(), error);
    case v1::AnalyzeEvent::kAttention:
      return addChunk(event.attention(), error);
    case v1::AnalyzeEvent::kSummary:
      return addSummary(event.summary(), error);
    case v1::AnalyzeEvent::EVENT_NOT_SET:
      break;
  }
  return false;
}

bool PromptAnalysis::loadFinished(const v1::RequestFinished& finished, const QString& promptText,
                                  QString* error) {
  reset(promptText, QString::fromStdString(finished.model()));
  if (!finished.has_tokens() || !finished.has_summary()) {
    return reject(QStringLiteral("feed request: no tokens or summary to show"), error);
  }
  v1::AnalyzeEvent event;
  *event.mutable_tokens() = finished.tokens();
  if (!addEvent(event, error)) return false;
  for (const v1::LayerStats& layer : finished.layers()) {
    *event.mutable_layer() = layer;
    if (!addEvent(event, error)) return false;
  }
  *event.mutable_summary() = finished.summary();
  return addEvent(event, error);
}

bool PromptAnalysis::addFetchedAttention(const v1::TensorChunk& chunk, QString* error) {
  if (!m_hasTokens) {
    return reject(QStringLiteral("fetched attention: arrived before the tokens"), error);
  }
  if (m_attention.count({chunk.layer(), chunk.head()}) != 0) return true;
  return addChunk(chunk, error);
}

void PromptAnalysis::markFailed(const QString& error) {
  m_failure = error;
  Q_EMIT failed(error);
}

bool PromptAnalysis::addTokens(const v1::Tokens& tokens, QString* error) {
  if (m_hasTokens) return reject(QStringLiteral("tokens: duplicate tokens event"), error);
  const int count = tokens.ids_size();
  if (count == 0) return reject(QStringLiteral("tokens: no token ids"), error);
  const auto sized = [count](int n) { return n == 0 || n == count; };
  if (!sized(tokens.tokens_size()) || !sized(tokens.texts_size()) ||
      !sized(tokens.special_size())) {
    return reject(QStringLiteral("tokens: %1 ids but %2 tokens, %3 texts, %4 special flags")
                      .arg(count)
                      .arg(tokens.tokens_size())
                      .arg(tokens.texts_size())
                      .arg(tokens.special_size()),
                  error);
  }
  m_tokens.resize(count);
  for (int i = 0; i < count; ++i) {
    PromptToken& t = m_tokens[i];
    t.id = tokens.ids(i);
    t.token = tokens.tokens_size() ? QString::fromStdString(tokens.tokens(i)) : QString();
    t.text = tokens.texts_size() ? QString::fromStdString(tokens.texts(i)) : t.token;
    if (t.text.isEmpty() && t.token.isEmpty()) t.text = QStringLiteral("#%1").arg(t.id);
    t.special = tokens.special_size() ? tokens.special(i) : false;
  }
  m_hasTokens = true;
  Q_EMIT tokensReady();
  return true;
}

bool PromptAnalysis::addLayer(const v1::LayerStats& layer, QString* error) {
  const QString name = QStringLiteral("layer %1").arg(layer.layer());
  if (layer.layer() < 0 || layer.layer() >= kMaxLayers) {
    return reject(name + QStringLiteral(": index outside [0, %1)").arg(kMaxLayers), error);
  }
  if (m_layers.count(layer.layer()) != 0)
    return reject(name + QStringLiteral(": duplicate"), error);
  const int heads = layer.sink_score_size();
  if (heads == 0) return reject(name + QStringLiteral(": no sink_score values"), error);
  if (m_heads != 0 && heads != m_heads) {
    return reject(
        name + QStringLiteral(": %1 heads, earlier layers had %2").arg(heads).arg(m_heads), error);
  }
  const QString problem = checkLayerArrays(layer, heads, tokenCount());
  if (!problem.isEmpty()) return reject(name + QStringLiteral(": ") + problem, error);
  m_heads = heads;
  m_layers.emplace(layer.layer(), layer);
  Q_EMIT layerAdded(layer.layer());
  return true;
}

bool PromptAnalysis::addChunk(const v1::TensorChunk& chunk, QString* error) {
  const QString name =
      QStringLiteral("attention (layer %1, head %2)").arg(chunk.layer()).arg(chunk.head());
  if (m_layers.count(chunk.layer()) == 0) {
    return reject(name + QStringLiteral(": arrived before its layer event"), error);
  }
  if (chunk.head() < 0 || chunk.head() >= m_heads) {
    return reject(name + QStringLiteral(": head outside [0, %1)").arg(m_heads), error);
  }
  const std::pair<int, int> key(chunk.layer(), chunk.head());
  if (m_attention.count(key) != 0) {
    return reject(name + QStringLiteral(": chunk for a tensor already complete"), error);
  }
  std::unique_ptr<AttentionTensorAssembly>& assembly = m_pending[key];
  if (!assembly) assembly = std::make_unique<AttentionTensorAssembly>(tokenCount());
  QString problem;
  if (!assembly->addChunk(chunk, &problem)) return reject(problem, error);
  if (!assembly->isComplete()) return true;
  return finishTensor(chunk.layer(), chunk.head(), assembly.get(), error);
}

bool PromptAnalysis::finishTensor(int layer, int head, AttentionTensorAssembly* assembly,
                                  QString* error) {
  QVector<float> weights;
  QString problem;
  const bool ok = assembly->decode(&weights, &problem);
  m_pending.erase({layer, head});
  if (!ok) {
    return reject(QStringLiteral("attention (layer %1, head %2): ").arg(layer).arg(head) + problem,
                  error);
  }
  m_attention.emplace(std::make_pair(layer, head), std::move(weights));
  Q_EMIT attentionReady(layer, head);
  return true;
}

bool PromptAnalysis::addSummary(const v1::Summary& summary, QString* error) {
  const QString problem = checkSummary(summary, tokenCount());
  if (!problem.isEmpty()) return reject(QStringLiteral("summary: ") + problem, error);
  m_summary = summary;
  Q_EMIT summaryReady();
  return true;
}

int PromptAnalysis::layerCount() const {
  return m_layers.empty() ? 0 : m_layers.rbegin()->first + 1;
}

const v1::LayerStats* PromptAnalysis::layer(int layer) const {
  const auto it = m_layers.find(layer);
  return it == m_layers.end() ? nullptr : &it->second;
}

const QVector<float>* PromptAnalysis::attention(int layer, int head) const {
  const auto it = m_attention.find({layer, head});
  return it == m_attention.end() ? nullptr : &it->second;
}

const v1::Summary* PromptAnalysis::summary() const {
  return m_summary.has_value() ? &*m_summary : nullptr;
}

bool PromptAnalysis::isStructural(int position) const {
  if (!m_summary) return false;
  for (const int64_t p : m_summary->structural()) {
    if (p == position) return true;
  }
  return false;
}

bool PromptAnalysis::isSink(int position) const {
  if (!m_summary) return false;
  for (const v1::Sink& sink : m_summary->sinks()) {
    if (sink.position() == position) return true;
  }
  return false;
}

double PromptAnalysis::zScore(int position) const {
  if (!m_summary || position < 0 || position >= m_summary->z_size()) return 0.0;
  return m_summary->z(position);
}

}  // namespace attnscope::dashboard
