// Small verbs that build the service's events for the dashboard model tests,
// so a test reads like the stream it feeds: tokens, layer, chunks, summary.
#pragma once

#include <QMetaType>
#include <QStringList>
#include <QVector>

#include "attnscope/v1/attnscope.pb.h"

namespace attnscope::dashboard::testing {

using AnalyzeEvents = QVector<attnscope::v1::AnalyzeEvent>;
using FeedEvents = QVector<attnscope::v1::FeedEvent>;
using GenerateEvents = QVector<attnscope::v1::GenerateEvent>;

// ---- Analyze
// Tokens with ids 100, 101, ... and the given texts.
attnscope::v1::AnalyzeEvent tokens(const QStringList& texts);
// A layer with these per-head sink scores (other per-head stats derived from
// them) and optional per-token hidden-state norms.
attnscope::v1::AnalyzeEvent layer(int index, const QVector<double>& sinkScores,
                                  const QVector<double>& norms = {});
// Causal weights for T tokens: row i spreads 1 evenly over keys 0..i, except
// that key 0 gets `sink` more (rows renormalized). Row-major T*T.
QVector<float> causalWeights(int tokens, double sink = 0.0);
// The float32 bytes of `weights` split into chunks of at most chunkBytes.
AnalyzeEvents attentionChunks(int layer, int head, int tokens, const QVector<float>& weights,
                              int chunkBytes);
// One chunk with explicit fields, for malformed cases.
attnscope::v1::AnalyzeEvent rawChunk(
    int layer, int head, QVector<qint64> shape, qint64 offset, qint64 totalBytes,
    const QByteArray& data, attnscope::v1::TensorDtype dtype = attnscope::v1::TENSOR_DTYPE_FLOAT32);
// The float16 bytes of `weights` in one chunk.
attnscope::v1::AnalyzeEvent float16Chunk(int layer, int head, int tokens,
                                         const QVector<float>& weights);
// A summary for T tokens: health, sinks as (position, z), max norms and
// normalized next-token entropies (nats = normalized * log 50257).
attnscope::v1::AnalyzeEvent summary(int tokens, double health,
                                    const QVector<QPair<int, double>>& sinks = {},
                                    const QVector<double>& maxNorms = {},
                                    const QVector<double>& entropy = {});
// A complete well-formed stream: T tokens, `layers` x `heads`, every head's
// attention in chunks of 16 bytes, a summary with health 8.
AnalyzeEvents fullStream(const QStringList& texts, int layers, int heads);

// ---- Subscribe
attnscope::v1::FeedEvent started(quint64 id, const QString& model = QStringLiteral("tiny"),
                                 const QString& rpc = QStringLiteral("Analyze"),
                                 const QString& preview = QStringLiteral("The cat"),
                                 int promptTokens = 2);
attnscope::v1::FeedEvent feedToken(quint64 id, int index, double normalized,
                                   const QString& text = QStringLiteral(" x"));
attnscope::v1::FeedEvent finished(quint64 id, double health, int sinks = 0,
                                  const QString& status = QStringLiteral("OK"),
                                  const QString& model = QStringLiteral("tiny"),
                                  const QString& rpc = QStringLiteral("Analyze"));

// ---- Generate
attnscope::v1::GenerateEvent generatePrompt(const QStringList& texts);
attnscope::v1::GenerateEvent generatedToken(int index, int position, const QString& text,
                                            double normalized);
attnscope::v1::GenerateEvent generateSummary(const QString& text);

}  // namespace attnscope::dashboard::testing

Q_DECLARE_METATYPE(attnscope::dashboard::testing::AnalyzeEvents)
Q_DECLARE_METATYPE(attnscope::dashboard::testing::FeedEvents)
Q_DECLARE_METATYPE(attnscope::dashboard::testing::GenerateEvents)
