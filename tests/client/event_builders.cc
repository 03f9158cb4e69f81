#include "tests/client/event_builders.h"

#include <QFloat16>
#include <cmath>
#include <cstring>

namespace attnscope::dashboard::testing {

namespace v1 = attnscope::v1;

v1::AnalyzeEvent tokens(const QStringList& texts) {
  v1::AnalyzeEvent event;
  v1::Tokens* t = event.mutable_tokens();
  for (int i = 0; i < texts.size(); ++i) {
    t->add_ids(100 + i);
    t->add_tokens(texts[i].toStdString());
    t->add_texts(texts[i].toStdString());
    t->add_special(false);
  }
  return event;
}

v1::AnalyzeEvent layer(int index, const QVector<double>& sinkScores, const QVector<double>& norms) {
  v1::AnalyzeEvent event;
  v1::LayerStats* l = event.mutable_layer();
  l->set_layer(index);
  for (const double s : sinkScores) {
    l->add_sink_score(s);
    l->add_first_token_mass(s / 2);
    l->add_attention_entropy(1.0 - s);
    l->add_prev_token_score(0.1);
    l->add_value_weighted_first_token_share(s / 4);
  }
  for (const double n : norms) l->add_hidden_state_norms(n);
  return event;
}

QVector<float> causalWeights(int tokens, double sink) {
  QVector<float> w(tokens * tokens, 0.0f);
  for (int i = 0; i < tokens; ++i) {
    const double total = (i + 1) + sink;
    for (int j = 0; j <= i; ++j) w[i * tokens + j] = float((1.0 + (j == 0 ? sink : 0.0)) / total);
  }
  return w;
}

v1::AnalyzeEvent rawChunk(int layer, int head, QVector<qint64> shape, qint64 offset,
                          qint64 totalBytes, const QByteArray& data, v1::TensorDtype dtype) {
  v1::AnalyzeEvent event;
  v1::TensorChunk* c = event.mutable_attention();
  c->set_name("attention");
  c->set_layer(layer);
  c->set_head(head);
  for (const qint64 d : shape) c->add_shape(d);
  c->set_dtype(dtype);
  c->set_offset(offset);
  c->set_total_bytes(totalBytes);
  c->set_data(data.constData(), data.size());
  return event;
}

AnalyzeEvents attentionChunks(int layer, int head, int tokens, const QVector<float>& weights,
                              int chunkBytes) {
  const QByteArray bytes(reinterpret_cast<const char*>(weights.constData()),
                         weights.size() * int(sizeof(float)));
  AnalyzeEvents events;
  for (qint64 offset = 0; offset < bytes.size(); offset += chunkBytes) {
    events.append(rawChunk(layer, head, {tokens, tokens}, offset, bytes.size(),
                           bytes.mid(offset, chunkBytes)));
  }
  return events;
}

v1::AnalyzeEvent float16Chunk(int layer, int head, int tokens, const QVector<float>& weights) {
  QByteArray bytes;
  for (const float w : weights) {
    const qfloat16 half(w);
    bytes.append(reinterpret_cast<const char*>(&half), sizeof(half));
  }
  return rawChunk(layer, head, {tokens, tokens}, 0, bytes.size(), bytes, v1::TENSOR_DTYPE_FLOAT16);
}

v1::AnalyzeEvent summary(int tokens, double health, const QVector<QPair<int, double>>& sinks,
                         const QVector<double>& maxNorms, const QVector<double>& entropy) {
  v1::AnalyzeEvent event;
  v1::Summary* s = event.mutable_summary();
  s->set_health(health);
  for (const auto& [position, z] : sinks) {
    v1::Sink* sink = s->add_sinks();
    sink->set_position(position);
    sink->set_z(z);
    sink->set_text("sink");
  }
  s->add_structural(0);
  s->set_threshold(6.0);
  s->set_template_("none");
  s->set_num_candidates(tokens - 1);
  for (const double n : maxNorms) s->add_max_norm(n);
  for (const double e : entropy) {
    s->add_next_token_entropy_normalized(e);
    s->add_next_token_entropy_nats(e * std::log(50257.0));
  }
  return event;
}

AnalyzeEvents fullStream(const QStringList& texts, int layers, int heads) {
  const int t = static_cast<int>(texts.size());
  AnalyzeEvents events{tokens(texts)};
  for (int l = 0; l < layers; ++l) {
    QVector<double> scores;
    for (int h = 0; h < heads; ++h) scores.append(0.1 * (h + 1));
    events.append(layer(l, scores, QVector<double>(t, 10.0 * (l + 1))));
    for (int h = 0; h < heads; ++h) {
      events += attentionChunks(l, h, t, causalWeights(t, l + h), 16);
    }
  }
  events.append(summary(t, 8.0, {}, QVector<double>(t, 5.0), QVector<double>(t, 0.5)));
  return events;
}

v1::FeedEvent started(quint64 id, const QString& model, const QString& rpc, const QString& preview,
                      int promptTokens) {
  v1::FeedEvent event;
  event.set_request_id(id);
  event.set_unix_time(1700000000.0 + id);
  v1::RequestStarted* s = event.mutable_started();
  s->set_rpc(rpc.toStdString());
  s->set_model(model.toStdString());
  s->set_prompt_preview(preview.toStdString());
  s->set_prompt_tokens(promptTokens);
  return event;
}

v1::FeedEvent feedToken(quint64 id, int index, double normalized, const QString& text) {
  v1::FeedEvent event;
  event.set_request_id(id);
  v1::TokenEntropy* t = event.mutable_token();
  t->set_index(index);
  t->set_text(text.toStdString());
  t->set_entropy_normalized(normalized);
  t->set_entropy_nats(normalized * std::log(50257.0));
  return event;
}

v1::FeedEvent finished(quint64 id, double health, int sinks, const QString& status,
                       const QString& model, const QString& rpc) {
  v1::FeedEvent event;
  event.set_request_id(id);
  event.set_unix_time(1700000001.0 + id);
  v1::RequestFinished* f = event.mutable_finished();
  f->set_rpc(rpc.toStdString());
  f->set_model(model.toStdString());
  f->set_prompt_preview("The cat");
  f->set_prompt_tokens(2);
  f->set_status(status.toStdString());
  f->set_health(health);
  f->set_sink_count(sinks);
  f->set_max_entropy(0.42);
  f->add_entropy_normalized(0.2);
  f->add_entropy_normalized(0.42);
  f->set_duration_seconds(0.25);
  return event;
}

v1::GenerateEvent generatePrompt(const QStringList& texts) {
  v1::GenerateEvent event;
  *event.mutable_prompt() = tokens(texts).tokens();
  return event;
}

v1::GenerateEvent generatedToken(int index, int position, const QString& text, double normalized) {
  v1::GenerateEvent event;
  v1::GeneratedToken* t = event.mutable_token();
  t->set_index(index);
  t->set_position(position);
  t->set_id(500 + index);
  t->set_text(text.toStdString());
  t->set_probability(0.5);
  t->set_entropy_normalized(normalized);
  t->set_entropy_nats(normalized * std::log(50257.0));
  return event;
}

v1::GenerateEvent generateSummary(const QString& text) {
  v1::GenerateEvent event;
  event.mutable_summary()->set_text(text.toStdString());
  return event;
}

}  // namespace attnscope::dashboard::testing
