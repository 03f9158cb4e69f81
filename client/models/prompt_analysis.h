// One prompt's analysis, assembled from the events of an Analyze stream:
// the tokens, the per-layer statistics, the raw attention tensors and the
// summary. The heatmap, sink-grid and norm-bar models read from it.
#pragma once

#include <QObject>
#include <QString>
#include <QStringList>
#include <QVector>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "attnscope/v1/attnscope.pb.h"
#include "client/models/attention_tensor.h"

namespace attnscope::dashboard {

// One prompt token as the model sees it.
struct PromptToken {
  qint64 id = 0;
  QString token;  // vocabulary string ("ĠThe")
  QString text;   // what it reads as (" The")
  bool special = false;
};

// Accepts events in the order Analyze sends them: one `tokens`; per layer
// one `layer` then that layer's `attention` chunks; one `summary`. An event
// that breaks the order or is malformed (a layer before the tokens, per-head
// arrays of different lengths, per-token arrays not of length T, a chunk
// beyond total_bytes or of the wrong size, a second summary, anything after
// the summary) is rejected: addEvent returns false with a message naming the
// event and field, the analysis keeps what it had, and the message is kept in
// errors(). Nothing here crashes on any input.
class PromptAnalysis : public QObject {
  Q_OBJECT

 public:
  // Layers accepted per prompt; a layer index at or beyond it is malformed.
  static constexpr int kMaxLayers = 1024;

  explicit PromptAnalysis(QObject* parent = nullptr);
  ~PromptAnalysis() override;

  // Forgets everything and starts a new prompt (text and model for display).
  void reset(const QString& promptText = QString(), const QString& model = QString());
  bool addEvent(const attnscope::v1::AnalyzeEvent& event, QString* error = nullptr);

  // Loads a finished Analyze as the live feed carries it (tokens, every
  // layer's statistics, the summary; no attention) after a reset(promptText,
  // finished.model()), exactly as if those events had streamed. Returns false
  // (the first problem in *error and errors()) when a part is missing or
  // malformed.
  bool loadFinished(const attnscope::v1::RequestFinished& finished, const QString& promptText,
                    QString* error = nullptr);
  // An attention chunk fetched on demand for the prompt shown (accepted also
  // after the summary, for a layer already received; the same checks as a
  // streamed chunk). A chunk of a tensor already complete is ignored.
  bool addFetchedAttention(const attnscope::v1::TensorChunk& chunk, QString* error = nullptr);
  // Marks the analysis as failed (the request for it ended with `error`):
  // nothing more will arrive. Cleared by reset().
  void markFailed(const QString& error);
  QString failure() const { return m_failure; }

  QString promptText() const { return m_promptText; }
  QString model() const { return m_model; }
  QStringList errors() const { return m_errors; }

  bool hasTokens() const { return m_hasTokens; }
  int tokenCount() const { return m_tokens.size(); }
  // Precondition for the accessors taking a position: 0 <= position < T.
  const PromptToken& token(int position) const { return m_tokens[position]; }

  // Layers: rows up to the highest layer index received; heads: the length of
  // the per-head arrays (0 before the first layer).
  int layerCount() const;
  int headCount() const { return m_heads; }
  // nullptr until that layer's event has arrived.
  const attnscope::v1::LayerStats* layer(int layer) const;
  // The (T, T) weights, row-major (rows = queries); nullptr until complete.
  const QVector<float>* attention(int layer, int head) const;
  // nullptr until the summary has arrived.
  const attnscope::v1::Summary* summary() const;
  bool isComplete() const { return summary() != nullptr; }

  // From the summary (false / 0 before it).
  bool isStructural(int position) const;
  bool isSink(int position) const;
  double zScore(int position) const;

 Q_SIGNALS:
  void cleared();
  void tokensReady();
  void layerAdded(int layer);
  void attentionReady(int layer, int head);
  void summaryReady();
  void rejected(const QString& error);
  void failed(const QString& error);

 private:
  bool addTokens(const attnscope::v1::Tokens& tokens, QString* error);
  bool addLayer(const attnscope::v1::LayerStats& layer, QString* error);
  bool addChunk(const attnscope::v1::TensorChunk& chunk, QString* error);
  bool addSummary(const attnscope::v1::Summary& summary, QString* error);
  bool finishTensor(int layer, int head, AttentionTensorAssembly* assembly, QString* error);
  bool reject(const QString& message, QString* error);

  QString m_promptText;
  QString m_model;
  QStringList m_errors;
  QString m_failure;
  bool m_hasTokens = false;
  QVector<PromptToken> m_tokens;
  int m_heads = 0;
  std::map<int, attnscope::v1::LayerStats> m_layers;
  std::map<std::pair<int, int>, std::unique_ptr<AttentionTensorAssembly>> m_pending;
  std::map<std::pair<int, int>, QVector<float>> m_attention;
  std::optional<attnscope::v1::Summary> m_summary;
};

}  // namespace attnscope::dashboard
