// NormBarsModel, EntropySeries and GenerationTrace: the per-token series of
// the prompt view's charts.
#include <QtTest>
#include <cmath>

#include "client/models/colors.h"
#include "client/models/entropy_series.h"
#include "client/models/generation_trace.h"
#include "client/models/norm_bars_model.h"
#include "tests/client/event_builders.h"
#include "tests/client/test_registry.h"

namespace attnscope::dashboard {
namespace {

using namespace testing;  // NOLINT: the builders are the vocabulary here

QVector<double> ratios(const NormBarsModel& model) {
  QVector<double> out;
  for (int i = 0; i < model.rowCount(); ++i) out << model.ratio(i);
  return out;
}

}  // namespace

class NormBarsModelTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void lowerMedian_data() {
    QTest::addColumn<QVector<double>>("values");
    QTest::addColumn<double>("median");
    QTest::newRow("odd") << QVector<double>{5, 1, 3} << 3.0;
    QTest::newRow("even takes the lower") << QVector<double>{4, 1, 3, 2} << 2.0;
    QTest::newRow("one") << QVector<double>{7} << 7.0;
  }

  void lowerMedian() {
    QFETCH(QVector<double>, values);
    QFETCH(double, median);
    QCOMPARE(NormBarsModel::lowerMedian(values), median);
  }

  void ratiosToTheMedian_data() {
    QTest::addColumn<QVector<double>>("maxNorms");
    QTest::addColumn<double>("median");
    QTest::addColumn<int>("argmax");
    QTest::addColumn<QString>("firstRatioText");
    // The massive first token: median of max_norm[1:] = lower median of {20, 10, 30, 40} = 20.
    QTest::newRow("massive first token")
        << QVector<double>{300, 20, 10, 30, 40} << 20.0 << 0 << "15.0×";
    QTest::newRow("flat") << QVector<double>{10, 10, 10} << 10.0 << 0 << "1.0×";
    QTest::newRow("one token: its own median") << QVector<double>{12} << 12.0 << 0 << "1.0×";
    QTest::newRow("zero median has no ratio") << QVector<double>{5, 0, 0} << 0.0 << 0 << "";
  }

  void ratiosToTheMedian() {
    QFETCH(QVector<double>, maxNorms);
    QFETCH(double, median);
    QFETCH(int, argmax);
    QFETCH(QString, firstRatioText);
    QStringList texts;
    for (int i = 0; i < maxNorms.size(); ++i) texts << QStringLiteral("t%1").arg(i);
    PromptAnalysis analysis;
    NormBarsModel model;
    model.setAnalysis(&analysis);
    QVERIFY(analysis.addEvent(tokens(texts)));
    QVERIFY(analysis.addEvent(summary(texts.size(), 9.0, {}, maxNorms)));
    QCOMPARE(model.rowCount(), maxNorms.size());
    QCOMPARE(model.median(), median);
    QCOMPARE(model.argmax(), argmax);
    QCOMPARE(model.index(0, NormBarsModel::Ratio).data().toString(), firstRatioText);
    QCOMPARE(model.index(0, NormBarsModel::MaxNorm).data(NormBarsModel::ValueRole).toDouble(),
             maxNorms[0]);
  }

  // Before the summary, bars are the max over the layers received so far.
  void barsGrowWithTheLayers() {
    PromptAnalysis analysis;
    NormBarsModel model;
    model.setAnalysis(&analysis);
    QVERIFY(analysis.addEvent(tokens({"a", "b", "c"})));
    QCOMPARE(model.rowCount(), 0);
    QVERIFY(analysis.addEvent(layer(0, {0.5}, {50, 2, 4})));
    QCOMPARE(ratios(model), QVector<double>({25, 1, 2}));
    QVERIFY(analysis.addEvent(layer(1, {0.5}, {10, 8, 1})));
    QCOMPARE(ratios(model), QVector<double>({50.0 / 4, 8.0 / 4, 1}));
    QVERIFY(analysis.addEvent(summary(3, 9.0, {}, {60, 8, 6})));
    QCOMPARE(ratios(model), QVector<double>({10, 8.0 / 6, 1}));
  }
};

class EntropySeriesTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void buckets_data() {
    QTest::addColumn<double>("normalized");
    QTest::addColumn<int>("bucket");
    QTest::newRow("0") << 0.0 << 0;
    QTest::newRow("0.299") << 0.299 << 0;
    QTest::newRow("0.3") << 0.3 << 1;
    QTest::newRow("0.599") << 0.599 << 1;
    QTest::newRow("0.6") << 0.6 << 2;
    QTest::newRow("1") << 1.0 << 2;
  }

  void buckets() {
    QFETCH(double, normalized);
    QFETCH(int, bucket);
    QCOMPARE(entropyBucket(normalized), bucket);
    EntropySeries series;
    QVERIFY(series.setPrompt({"x"}, {normalized}, {normalized * 10}));
    QCOMPARE(series.points().first().bucket, bucket);
    QCOMPARE(series.bucketPoints(bucket).size(), 1);
  }

  void promptRejects_data() {
    QTest::addColumn<QStringList>("texts");
    QTest::addColumn<QVector<double>>("normalized");
    QTest::addColumn<QString>("errorPart");
    QTest::newRow("lengths differ")
        << QStringList{"a", "b"} << QVector<double>{0.1} << "2 texts, 1 normalized";
    QTest::newRow("above 1") << QStringList{"a"} << QVector<double>{1.5} << "1.5 outside [0, 1]";
    QTest::newRow("negative") << QStringList{"a"} << QVector<double>{-0.2} << "outside [0, 1]";
    QTest::newRow("NaN") << QStringList{"a"} << QVector<double>{qQNaN()} << "not finite";
  }

  void promptRejects() {
    QFETCH(QStringList, texts);
    QFETCH(QVector<double>, normalized);
    QFETCH(QString, errorPart);
    EntropySeries series;
    QVERIFY(series.setPrompt({"keep"}, {0.5}, {5.0}));
    QString error;
    QVERIFY(!series.setPrompt(texts, normalized, QVector<double>(texts.size(), 1.0), &error));
    QVERIFY2(error.contains(errorPart), qPrintable(error));
    QCOMPARE(series.points().size(), 1);  // unchanged
    QCOMPARE(series.points().first().label, QStringLiteral("keep"));
  }

  // Prompt "A B C" (positions 0..2), then generated " d" at 3 and " e" at 4:
  // " d" was drawn from the distribution at 2, " e" from the one at 3.
  void generatedTokensContinueTheLine() {
    EntropySeries series;
    QVERIFY(series.setPrompt({"A", "B", "C"}, {0.1, 0.4, 0.7}, {1, 4, 7}));
    QVERIFY(series.appendGenerated(3, " d", 0.65, 6.5));
    QVERIFY(series.appendGenerated(4, " e", 0.2, 2));
    const QVector<EntropyPoint>& p = series.points();
    QCOMPARE(p.size(), 4);
    QCOMPARE(p[2].position, 2);
    QCOMPARE(p[2].normalized, 0.65);  // the generator's value for the same distribution
    QCOMPARE(p[2].label, QStringLiteral("C"));
    QVERIFY(!p[2].generated);
    QCOMPARE(p[3].position, 3);
    QCOMPARE(p[3].label, QStringLiteral(" d"));
    QVERIFY(p[3].generated);
    QCOMPARE(p[3].bucket, 0);
    QCOMPARE(series.linePoints(false).size(), 3);
    QCOMPARE(series.linePoints(true), QVector<QPointF>({QPointF(2, 0.65), QPointF(3, 0.2)}));
  }

  void generatedRejects_data() {
    QTest::addColumn<int>("position");
    QTest::addColumn<double>("normalized");
    QTest::addColumn<QString>("errorPart");
    QTest::newRow("inside the prompt") << 2 << 0.5 << "position 2 after position 3";
    QTest::newRow("same position twice") << 3 << 0.5 << "position 3 after position 3";
    QTest::newRow("entropy above 1") << 4 << 2.0 << "outside [0, 1]";
  }

  void generatedRejects() {
    QFETCH(int, position);
    QFETCH(double, normalized);
    QFETCH(QString, errorPart);
    EntropySeries series;
    QVERIFY(series.setPrompt({"A", "B", "C"}, {0.1, 0.4, 0.7}, {1, 4, 7}));
    QVERIFY(series.appendGenerated(3, " d", 0.5, 5));
    QString error;
    QVERIFY(!series.appendGenerated(position, " x", normalized, 1.0, &error));
    QVERIFY2(error.contains(errorPart), qPrintable(error));
    QCOMPARE(series.points().size(), 3);
  }
};

class GenerationTraceTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void streams_data() {
    QTest::addColumn<GenerateEvents>("events");
    QTest::addColumn<int>("rejected");
    QTest::addColumn<QString>("errorPart");
    QTest::addColumn<QString>("text");
    QTest::newRow("well formed") << GenerateEvents{generatePrompt({"a", "b"}),
                                                   generatedToken(0, 2, " c", 0.5),
                                                   generatedToken(1, 3, " d", 0.1),
                                                   generateSummary(" c d")}
                                 << 0 << ""
                                 << " c d";
    QTest::newRow("token before the prompt")
        << GenerateEvents{generatedToken(0, 2, " c", 0.5), generatePrompt({"a", "b"})} << 1
        << "before the prompt"
        << "";
    QTest::newRow("skipped index")
        << GenerateEvents{generatePrompt({"a", "b"}), generatedToken(1, 3, " d", 0.1)} << 1
        << "index 1 at position 3, expected 0 at 2"
        << "";
    QTest::newRow("wrong position")
        << GenerateEvents{generatePrompt({"a", "b"}), generatedToken(0, 5, " d", 0.1)} << 1
        << "expected 0 at 2"
        << "";
    QTest::newRow("event after the summary")
        << GenerateEvents{generatePrompt({"a"}), generateSummary(""),
                          generatedToken(0, 1, " z", 0.1)}
        << 1 << "after the summary"
        << "";
    QTest::newRow("NaN entropy") << GenerateEvents{generatePrompt({"a"}),
                                                   generatedToken(0, 1, " z", qQNaN())}
                                 << 1 << "not finite"
                                 << "";
    QTest::newRow("text before the summary")
        << GenerateEvents{generatePrompt({"a"}), generatedToken(0, 1, " z", 0.2),
                          generatedToken(1, 2, "!", 0.3)}
        << 0 << ""
        << " z!";
    // Byte-level tokens: three fragments of an em dash make the dash; a
    // generation that stops inside a character keeps its byte, where the
    // server's decoding has U+FFFD.
    QTest::newRow("byte fragments make a character")
        << GenerateEvents{generatePrompt({"a"}), generatedToken(0, 1, "<0xE2>", 0.2),
                          generatedToken(1, 2, "<0x80>", 0.2), generatedToken(2, 3, "<0x94>", 0.2),
                          generatedToken(3, 4, " ok", 0.2)}
        << 0 << "" << QString::fromUtf8("\xE2\x80\x94 ok");
    QTest::newRow("cut inside a character")
        << GenerateEvents{generatePrompt({"a"}), generatedToken(0, 1, " ok", 0.2),
                          generatedToken(1, 2, "<0xE2>", 0.2),
                          generateSummary(QString::fromUtf8(" ok\xEF\xBF\xBD"))}
        << 0 << "" << " ok<0xE2>";
  }

  void streams() {
    QFETCH(GenerateEvents, events);
    QFETCH(int, rejected);
    QFETCH(QString, errorPart);
    QFETCH(QString, text);
    GenerationTrace trace;
    QStringList errors;
    for (const auto& event : events) {
      QString error;
      if (!trace.addEvent(event, &error)) errors << error;
    }
    QCOMPARE(errors.size(), rejected);
    if (!errorPart.isEmpty())
      QVERIFY2(errors.first().contains(errorPart), qPrintable(errors.first()));
    QCOMPARE(trace.text(), text);
  }
};

ATTNSCOPE_REGISTER_TEST(NormBarsModelTest)
ATTNSCOPE_REGISTER_TEST(EntropySeriesTest)
ATTNSCOPE_REGISTER_TEST(GenerationTraceTest)

}  // namespace attnscope::dashboard

#include "series_models_test.moc"
