// PromptAnalysis and AttentionTensorAssembly: an Analyze stream assembled,
// malformed and out-of-order events rejected.
#include "client/models/prompt_analysis.h"

#include <QSignalSpy>
#include <QtTest>
#include <algorithm>

#include "tests/client/event_builders.h"
#include "tests/client/test_registry.h"

namespace attnscope::dashboard {
namespace {

using namespace testing;  // NOLINT: the builders are the vocabulary here

const QStringList kThree{"The", " cat", " sat"};

QByteArray floats(std::initializer_list<float> values) {
  return QByteArray(reinterpret_cast<const char*>(values.begin()),
                    int(values.size() * sizeof(float)));
}

// The full 3-token stream with `event` inserted at `at` (negative: from the end).
AnalyzeEvents withEvent(AnalyzeEvents events, int at, const attnscope::v1::AnalyzeEvent& event) {
  events.insert(at >= 0 ? at : events.size() + 1 + at, event);
  return events;
}

}  // namespace

class PromptAnalysisTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  // Events in and out of Analyze's order.
  void eventOrder_data() {
    addStreamColumns();
    const AnalyzeEvents full = fullStream(kThree, 2, 2);
    const QByteArray nine = floats({1, 0, 0, .5f, .5f, 0, .2f, .3f, .5f});
    QTest::newRow("well formed") << full << "" << 0 << 2 << 4 << true;
    QTest::newRow("layer before tokens")
        << AnalyzeEvents{layer(0, {0.5}), tokens(kThree)} << "layer 0: arrived before the tokens"
        << 1 << 0 << 0 << false;
    QTest::newRow("summary before tokens")
        << AnalyzeEvents{summary(3, 5.0)} << "summary: arrived before the tokens" << 1 << 0 << 0
        << false;
    QTest::newRow("chunk before its layer")
        << AnalyzeEvents{tokens(kThree), rawChunk(0, 0, {3, 3}, 0, 36, nine)}
        << "arrived before its layer event" << 1 << 0 << 0 << false;
    QTest::newRow("duplicate summary")
        << withEvent(full, -1, summary(3, 4.0)) << "summary: arrived after the summary" << 1 << 2
        << 4 << true;
    QTest::newRow("layer after summary")
        << withEvent(full, -1, layer(2, {0.1, 0.2})) << "layer 2: arrived after the summary" << 1
        << 2 << 4 << true;
    QTest::newRow("duplicate tokens")
        << withEvent(full, 1, tokens(kThree)) << "duplicate tokens" << 1 << 2 << 4 << true;
    QTest::newRow("duplicate layer")
        << AnalyzeEvents{tokens(kThree), layer(0, {0.5}), layer(0, {0.5})} << "layer 0: duplicate"
        << 1 << 1 << 0 << false;
    QTest::newRow("layers out of order are fine")
        << AnalyzeEvents{tokens(kThree), layer(1, {0.5}), layer(0, {0.5})} << "" << 0 << 2 << 0
        << false;
    QTest::newRow("empty event") << AnalyzeEvents{attnscope::v1::AnalyzeEvent()} << "no payload"
                                 << 1 << 0 << 0 << false;
  }

  void eventOrder() { checkStream(); }

  // Attention chunks that cannot be reassembled into a (T, T) tensor.
  void malformedChunks_data() {
    addStreamColumns();
    const QByteArray nine = floats({1, 0, 0, .5f, .5f, 0, .2f, .3f, .5f});
    QTest::newRow("chunk offset beyond total_bytes")
        << AnalyzeEvents{tokens(kThree), layer(0, {0.5}),
                         rawChunk(0, 0, {3, 3}, 40, 36, floats({1}))}
        << "bytes [40, 44) outside [0, 36)" << 1 << 1 << 0 << false;
    QTest::newRow("chunk running past total_bytes")
        << AnalyzeEvents{tokens(kThree), layer(0, {0.5}),
                         rawChunk(0, 0, {3, 3}, 32, 36, floats({1, 2}))}
        << "bytes [32, 40) outside [0, 36)" << 1 << 1 << 0 << false;
    QTest::newRow("negative offset") << AnalyzeEvents{tokens(kThree), layer(0, {0.5}),
                                                      rawChunk(0, 0, {3, 3}, -4, 36, floats({1}))}
                                     << "outside [0, 36)" << 1 << 1 << 0 << false;
    QTest::newRow("total_bytes not T*T*4")
        << AnalyzeEvents{tokens(kThree), layer(0, {0.5}),
                         rawChunk(0, 0, {3, 3}, 0, 32, nine.left(32))}
        << "total_bytes 32, expected 36" << 1 << 1 << 0 << false;
    QTest::newRow("shape not (T, T)") << AnalyzeEvents{tokens(kThree), layer(0, {0.5}),
                                                       rawChunk(0, 0, {2, 2}, 0, 16, nine.left(16))}
                                      << "shape (2, 2), expected (3, 3)" << 1 << 1 << 0 << false;
    QTest::newRow("empty chunk") << AnalyzeEvents{tokens(kThree), layer(0, {0.5}),
                                                  rawChunk(0, 0, {3, 3}, 0, 36, QByteArray())}
                                 << "outside [0, 36)" << 1 << 1 << 0 << false;
    QTest::newRow("overlapping chunks")
        << AnalyzeEvents{tokens(kThree), layer(0, {0.5}),
                         rawChunk(0, 0, {3, 3}, 0, 36, nine.left(20)),
                         rawChunk(0, 0, {3, 3}, 16, 36, nine.mid(16))}
        << "bytes [16, 36) were already received" << 1 << 1 << 0 << false;
    QTest::newRow("head beyond the layer's heads")
        << AnalyzeEvents{tokens(kThree), layer(0, {0.5, 0.5}), rawChunk(0, 2, {3, 3}, 0, 36, nine)}
        << "head outside [0, 2)" << 1 << 1 << 0 << false;
    QTest::newRow("chunk after the tensor is complete")
        << AnalyzeEvents{tokens(kThree), layer(0, {0.5}), rawChunk(0, 0, {3, 3}, 0, 36, nine),
                         rawChunk(0, 0, {3, 3}, 0, 36, nine)}
        << "already complete" << 1 << 1 << 1 << false;
    QTest::newRow("NaN weight") << AnalyzeEvents{tokens(kThree), layer(0, {0.5}),
                                                 rawChunk(0, 0, {3, 3}, 0, 36,
                                                          floats({1, 0, 0, float(qQNaN()), 1, 0, 0,
                                                                  0, 1}))}
                                << "weight at (1, 0) is not finite" << 1 << 1 << 0 << false;
  }

  void malformedChunks() { checkStream(); }

  // Per-layer and summary arrays of the wrong size or range.
  void malformedStats_data() {
    addStreamColumns();
    QTest::newRow("head count changes")
        << AnalyzeEvents{tokens(kThree), layer(0, {0.5, 0.4}), layer(1, {0.5})}
        << "layer 1: 1 heads, earlier layers had 2" << 1 << 1 << 0 << false;
    QTest::newRow("per-head arrays disagree")
        << AnalyzeEvents{tokens(kThree),
                         [] {
                           auto e = layer(0, {0.5, 0.4});
                           e.mutable_layer()->add_first_token_mass(0.3);
                           return e;
                         }()}
        << "first_token_mass has 3 values, expected 2" << 1 << 0 << 0 << false;
    QTest::newRow("hidden_state_norms not of length T")
        << AnalyzeEvents{tokens(kThree), layer(0, {0.5}, {1, 2})}
        << "hidden_state_norms has 2 values" << 1 << 0 << 0 << false;
    QTest::newRow("negative layer index") << AnalyzeEvents{tokens(kThree), layer(-1, {0.5})}
                                          << "outside [0, 1024)" << 1 << 0 << 0 << false;
    QTest::newRow("layer without heads")
        << AnalyzeEvents{tokens(kThree), layer(0, {})} << "no sink_score" << 1 << 0 << 0 << false;
    QTest::newRow("sink position outside the prompt")
        << AnalyzeEvents{tokens(kThree), summary(3, 5.0, {{3, 7.0}})}
        << "sink position 3 outside [0, 3)" << 1 << 0 << 0 << false;
    QTest::newRow("summary per-token arrays of the wrong length")
        << AnalyzeEvents{tokens(kThree), summary(3, 5.0, {}, {1, 2})} << "max_norm has 2 values"
        << 1 << 0 << 0 << false;
    QTest::newRow("health outside 0..10") << AnalyzeEvents{tokens(kThree), summary(3, -1.0)}
                                          << "health -1 outside 0..10" << 1 << 0 << 0 << false;
    QTest::newRow("no tokens") << AnalyzeEvents{tokens({})} << "no token ids" << 1 << 0 << 0
                               << false;
  }

  void malformedStats() { checkStream(); }

  // Chunks concatenate in order of offset, whatever order they arrive in.
  void chunksReassembleInAnyOrder_data() {
    QTest::addColumn<int>("chunkBytes");
    QTest::addColumn<bool>("reversed");
    QTest::newRow("one chunk") << 400 << false;
    QTest::newRow("4-byte chunks in order") << 4 << false;
    QTest::newRow("12-byte chunks reversed") << 12 << true;
    QTest::newRow("uneven 28-byte chunks reversed") << 28 << true;
  }

  void chunksReassembleInAnyOrder() {
    QFETCH(int, chunkBytes);
    QFETCH(bool, reversed);
    const QStringList texts{"a", "b", "c", "d", "e"};
    const QVector<float> weights = causalWeights(5, 3.0);
    AnalyzeEvents chunks = attentionChunks(0, 1, 5, weights, chunkBytes);
    if (reversed) std::reverse(chunks.begin(), chunks.end());
    PromptAnalysis analysis;
    QVERIFY(analysis.addEvent(tokens(texts)));
    QVERIFY(analysis.addEvent(layer(0, {0.2, 0.9})));
    for (int i = 0; i < chunks.size(); ++i) {
      QVERIFY(analysis.addEvent(chunks[i]));
      QCOMPARE(analysis.attention(0, 1) != nullptr, i == chunks.size() - 1);
    }
    QCOMPARE(*analysis.attention(0, 1), weights);
    QCOMPARE((*analysis.attention(0, 1))[4 * 5 + 0], float(4.0 / 8.0));  // row 4: (1+3)/(5+3)
  }

  void float16Decodes() {
    PromptAnalysis analysis;
    QVERIFY(analysis.addEvent(tokens({"x", "y"})));
    QVERIFY(analysis.addEvent(layer(0, {0.5})));
    QVERIFY(analysis.addEvent(float16Chunk(0, 0, 2, {1.0f, 0.0f, 0.25f, 0.75f})));
    QCOMPARE(*analysis.attention(0, 0), QVector<float>({1.0f, 0.0f, 0.25f, 0.75f}));
  }

  void float16ChunkOfFloat32Size() {
    PromptAnalysis analysis;
    QVERIFY(analysis.addEvent(tokens({"x", "y"})));
    QVERIFY(analysis.addEvent(layer(0, {0.5})));
    QVERIFY(!analysis.addEvent(
        rawChunk(0, 0, {2, 2}, 0, 16, QByteArray(16, '\0'), attnscope::v1::TENSOR_DTYPE_FLOAT16)));
    QVERIFY(analysis.errors().first().contains("total_bytes 16, expected 8"));
  }

  void summaryFlags() {
    PromptAnalysis analysis;
    QVERIFY(analysis.addEvent(tokens(kThree)));
    QVERIFY(analysis.addEvent(summary(3, 6.5, {{2, 7.25}})));
    QVERIFY(analysis.isStructural(0));
    QVERIFY(!analysis.isStructural(2));
    QVERIFY(analysis.isSink(2));
    QVERIFY(!analysis.isSink(0));
    QCOMPARE(analysis.summary()->health(), 6.5);
  }

  void resetForgetsEverything() {
    PromptAnalysis analysis;
    for (const auto& event : fullStream(kThree, 1, 1)) QVERIFY(analysis.addEvent(event));
    QVERIFY(!analysis.addEvent(summary(3, 1.0)));
    QSignalSpy cleared(&analysis, &PromptAnalysis::cleared);
    analysis.reset("next prompt", "tiny");
    QCOMPARE(cleared.count(), 1);
    QCOMPARE(analysis.tokenCount(), 0);
    QCOMPARE(analysis.layerCount(), 0);
    QVERIFY(analysis.attention(0, 0) == nullptr);
    QVERIFY(analysis.errors().isEmpty());
    QCOMPARE(analysis.promptText(), QStringLiteral("next prompt"));
    QVERIFY(analysis.addEvent(tokens({"again"})));
  }

  void textsFallBackToVocabularyStrings() {
    attnscope::v1::AnalyzeEvent event;
    event.mutable_tokens()->add_ids(7);
    event.mutable_tokens()->add_tokens("ĠThe");
    event.mutable_tokens()->add_ids(8);
    event.mutable_tokens()->add_tokens("x");
    PromptAnalysis analysis;
    QVERIFY(analysis.addEvent(event));
    QCOMPARE(analysis.token(0).text, QStringLiteral("ĠThe"));
    QCOMPARE(analysis.token(1).id, qint64(8));
  }

 private:
  void addStreamColumns() {
    QTest::addColumn<AnalyzeEvents>("events");
    QTest::addColumn<QString>("errorPart");  // of the first rejection; empty: none
    QTest::addColumn<int>("rejected");
    QTest::addColumn<int>("layers");
    QTest::addColumn<int>("tensors");  // complete attention tensors
    QTest::addColumn<bool>("complete");
  }

  void checkStream() {
    QFETCH(AnalyzeEvents, events);
    QFETCH(QString, errorPart);
    QFETCH(int, rejected);
    QFETCH(int, layers);
    QFETCH(int, tensors);
    QFETCH(bool, complete);

    PromptAnalysis analysis;
    QSignalSpy ready(&analysis, &PromptAnalysis::attentionReady);
    int refused = 0;
    for (const auto& event : events) refused += analysis.addEvent(event) ? 0 : 1;
    QCOMPARE(refused, rejected);
    QCOMPARE(analysis.errors().size(), rejected);
    if (!errorPart.isEmpty()) {
      QVERIFY2(analysis.errors().first().contains(errorPart),
               qPrintable(analysis.errors().first()));
    }
    QCOMPARE(analysis.layerCount(), layers);
    QCOMPARE(ready.count(), tensors);
    QCOMPARE(analysis.isComplete(), complete);
  }
};

ATTNSCOPE_REGISTER_TEST(PromptAnalysisTest)

}  // namespace attnscope::dashboard

#include "prompt_analysis_test.moc"
