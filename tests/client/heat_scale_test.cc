// The heatmap's colour scales (linear, √, log), per-row normalisation and
// NaN, and the HeatmapModel cells that use them.
#include <QtTest>
#include <cmath>

#include "client/models/colors.h"
#include "client/models/heat_scale.h"
#include "client/models/heatmap_model.h"
#include "tests/client/event_builders.h"
#include "tests/client/test_registry.h"

namespace attnscope::dashboard {
namespace {

using namespace testing;  // NOLINT: the builders are the vocabulary here

bool near(double a, double b, double tolerance) {
  const double diff = std::abs(a - b);
  return diff <= tolerance;  // false for NaN
}

}  // namespace

class HeatScaleTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void colorIndex_data() {
    QTest::addColumn<int>("kind");
    QTest::addColumn<double>("value");
    QTest::addColumn<int>("index");  // of 0..255; -1: NaN
    const int linear = int(HeatScaleKind::Linear);
    const int sqrt = int(HeatScaleKind::Sqrt);
    const int log = int(HeatScaleKind::Log);
    QTest::newRow("linear 0") << linear << 0.0 << 0;
    QTest::newRow("linear 1") << linear << 1.0 << 255;
    QTest::newRow("linear 0.5") << linear << 0.5 << 128;       // 127.5 rounds up
    QTest::newRow("linear 1/2000") << linear << 5e-4 << 0;     // blank: why √ and log exist
    QTest::newRow("linear clamps above 1") << linear << 3.0 << 255;
    QTest::newRow("linear clamps below 0") << linear << -0.5 << 0;
    QTest::newRow("sqrt 0.25") << sqrt << 0.25 << 128;         // √.25 = .5
    QTest::newRow("sqrt 0.01") << sqrt << 0.01 << 26;          // .1 * 255 = 25.5
    QTest::newRow("sqrt 1/2000") << sqrt << 5e-4 << 6;         // .02236 * 255 = 5.70
    QTest::newRow("log 1") << log << 1.0 << 255;
    QTest::newRow("log 0.01") << log << 0.01 << 128;           // two of four decades
    QTest::newRow("log 1e-3") << log << 1e-3 << 64;            // 63.75
    QTest::newRow("log at the floor") << log << 1e-4 << 0;
    QTest::newRow("log below the floor") << log << 1e-9 << 0;
    QTest::newRow("log 0") << log << 0.0 << 0;
    QTest::newRow("log 1/2000") << log << 5e-4 << 45;          // .1747 * 255 = 44.5
    QTest::newRow("linear NaN") << linear << qQNaN() << -1;
    QTest::newRow("sqrt NaN") << sqrt << qQNaN() << -1;
    QTest::newRow("log NaN") << log << qQNaN() << -1;
  }

  void colorIndex() {
    QFETCH(int, kind);
    QFETCH(double, value);
    QFETCH(int, index);
    const HeatScale scale{HeatScaleKind(kind)};
    QCOMPARE(scale.colorIndex(value), index);
    if (index < 0) {
      QVERIFY(std::isnan(scale.position(value)));
      QCOMPARE(scale.color(value), HeatScale::missingColor());
    } else {
      QCOMPARE(scale.color(value), heatColor(index / 255.0));
    }
  }

  // valueAt inverts position, so a colour bar's ticks sit where their values are.
  void valueAtInvertsPosition() {
    for (const HeatScaleKind kind : {HeatScaleKind::Linear, HeatScaleKind::Sqrt, HeatScaleKind::Log}) {
      const HeatScale scale(kind);
      for (const double tick : scale.ticks()) {
        const double back = scale.valueAt(scale.position(tick));
        QVERIFY2(near(back, tick, 1e-9 * std::max(1.0, tick)),
                 qPrintable(QStringLiteral("%1: %2 -> %3").arg(heatScaleName(kind)).arg(tick).arg(back)));
      }
      QVERIFY(near(scale.position(scale.ticks().last()), 1.0, 1e-12));
      QVERIFY(near(scale.position(scale.ticks().first()), 0.0, 1e-12));
    }
  }

  void names() {
    for (const HeatScaleKind kind : {HeatScaleKind::Linear, HeatScaleKind::Sqrt, HeatScaleKind::Log})
      QCOMPARE(heatScaleFromName(heatScaleName(kind)), kind);
    QCOMPARE(heatScaleFromName(QStringLiteral("cubic")), HeatScaleKind::Linear);
    QCOMPARE(heatTickLabel(1e-3), QStringLiteral("1e-3"));
    QCOMPARE(heatTickLabel(0.25), QStringLiteral(".25"));
    QCOMPARE(heatTickLabel(0.0), QStringLiteral("0"));
    QCOMPARE(heatTickLabel(1.0), QStringLiteral("1"));
  }

  void rowNormalisation() {
    const float row[] = {0.002f, float(qQNaN()), 0.004f, 0.001f};
    QVERIFY(near(rowMaximum(row, 4), 0.004, 1e-9));  // NaN skipped
    QVERIFY(near(normalisedByRow(0.002, 0.004), 0.5, 1e-12));
    QVERIFY(std::isnan(normalisedByRow(qQNaN(), 0.004)));
    const float blank[] = {float(qQNaN()), 0.0f};
    QCOMPARE(rowMaximum(blank, 2), 0.0);
    QCOMPARE(normalisedByRow(0.0, 0.0), 0.0);  // a zero row stays zero, no 0/0
    QCOMPARE(rowMaximum(row, 0), 0.0);
  }

  // The model: a diffuse row (T = 40, 1/43 per key after the sink's 4/43)
  // colours by scale, and per-row normalisation makes its peak the darkest.
  void modelCells() {
    const int tokens = 40;
    QStringList texts;
    for (int i = 0; i < tokens; ++i) texts << QStringLiteral(" t%1").arg(i);
    PromptAnalysis analysis;
    HeatmapModel model;
    model.setAnalysis(&analysis);
    model.setHead(0, 1);
    QVERIFY(analysis.addEvent(this->tokensEvent(texts)));
    QVERIFY(analysis.addEvent(layer(0, {0.25, 0.75})));
    for (const auto& chunk : attentionChunks(0, 1, tokens, causalWeights(tokens, 3.0), 64))
      QVERIFY(analysis.addEvent(chunk));
    QVERIFY(model.hasWeights());
    const QModelIndex peak = model.index(39, 0);   // 4/43
    const QModelIndex plain = model.index(39, 20);  // 1/43
    const double w = plain.data(HeatmapModel::WeightRole).toDouble();
    QVERIFY(near(w, 1.0 / 43.0, 1e-6));

    QSignalSpy changed(&model, &QAbstractItemModel::dataChanged);
    QVERIFY(near(plain.data(HeatmapModel::ScaledRole).toDouble(), w, 1e-9));
    model.setScale(HeatScaleKind::Sqrt);
    QCOMPARE(changed.count(), 1);
    QVERIFY(near(plain.data(HeatmapModel::ScaledRole).toDouble(), std::sqrt(w), 1e-9));
    QCOMPARE(plain.data(Qt::BackgroundRole).value<QColor>(), HeatScale(HeatScaleKind::Sqrt).color(w));
    model.setScale(HeatScaleKind::Log);
    QVERIFY(near(plain.data(HeatmapModel::ScaledRole).toDouble(),
                 (std::log10(w) + 4.0) / 4.0, 1e-9));

    model.setScale(HeatScaleKind::Linear);
    model.setRowNormalised(true);
    QVERIFY(model.isRowNormalised());
    QVERIFY(near(peak.data(HeatmapModel::ScaledRole).toDouble(), 1.0, 1e-9));
    QVERIFY(near(plain.data(HeatmapModel::ScaledRole).toDouble(), 0.25, 1e-6));
    QCOMPARE(peak.data(Qt::BackgroundRole).value<QColor>(), heatColor(1.0));
    // The first row has one key: normalised, it is 1 as before.
    QVERIFY(near(model.index(0, 0).data(HeatmapModel::ScaledRole).toDouble(), 1.0, 1e-9));
    // WeightRole stays the weight the server sent; the tooltip says both.
    QVERIFY(near(plain.data(HeatmapModel::WeightRole).toDouble(), w, 1e-9));
    QVERIFY2(plain.data(Qt::ToolTipRole).toString().contains(QStringLiteral("0.250 of the row's peak")),
             qPrintable(plain.data(Qt::ToolTipRole).toString()));
  }

 private:
  static attnscope::v1::AnalyzeEvent tokensEvent(const QStringList& texts) { return tokens(texts); }
};

ATTNSCOPE_REGISTER_TEST(HeatScaleTest)

}  // namespace attnscope::dashboard

#include "heat_scale_test.moc"
