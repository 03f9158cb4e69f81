// HeatmapModel and SinkGridModel: the two grids of the prompt view.
#include <QFont>
#include <QSignalSpy>
#include <QtTest>

#include "client/models/colors.h"
#include "client/models/heatmap_model.h"
#include "client/models/heat_scale.h"
#include "client/models/sink_grid_model.h"
#include "tests/client/event_builders.h"
#include "tests/client/test_registry.h"

namespace attnscope::dashboard {
namespace {

using namespace testing;  // NOLINT: the builders are the vocabulary here

// T tokens, one layer with two heads; head 1's attention (sink 3) arrives.
void feedPrompt(PromptAnalysis* analysis, int tokenCount) {
  QStringList texts;
  for (int i = 0; i < tokenCount; ++i)
    texts << (i == 0 ? QStringLiteral("The") : QStringLiteral(" w%1").arg(i));
  QVERIFY(analysis->addEvent(tokens(texts)));
  QVERIFY(analysis->addEvent(layer(0, {0.25, 0.75})));
  for (const auto& chunk : attentionChunks(0, 1, tokenCount, causalWeights(tokenCount, 3.0), 64)) {
    QVERIFY(analysis->addEvent(chunk));
  }
}

}  // namespace

class HeatmapModelTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void cells_data() {
    QTest::addColumn<int>("tokens");
    QTest::addColumn<int>("row");
    QTest::addColumn<int>("column");
    QTest::addColumn<QVariant>("weight");  // WeightRole; invalid: blank cell
    QTest::addColumn<QString>("text");     // DisplayRole

    // Row i of causalWeights(T, 3): key 0 gets 4/(i+4), keys 1..i get 1/(i+4).
    QTest::newRow("diagonal of the first query") << 4 << 0 << 0 << QVariant(1.0) << "1";
    QTest::newRow("query 3 reads the sink") << 4 << 3 << 0 << QVariant(4.0 / 7.0) << ".57";
    QTest::newRow("query 3 reads itself") << 4 << 3 << 3 << QVariant(1.0 / 7.0) << ".14";
    QTest::newRow("above the diagonal is blank") << 4 << 1 << 2 << QVariant() << "";
    QTest::newRow("last column of the first row is blank") << 4 << 0 << 3 << QVariant() << "";
    QTest::newRow("large grids print no numbers") << 20 << 19 << 0 << QVariant(4.0 / 23.0) << "";
    QTest::newRow("outside the grid") << 4 << 4 << 0 << QVariant() << "";
  }

  void cells() {
    QFETCH(int, tokens);
    QFETCH(int, row);
    QFETCH(int, column);
    QFETCH(QVariant, weight);
    QFETCH(QString, text);
    PromptAnalysis analysis;
    HeatmapModel model;
    model.setAnalysis(&analysis);
    model.setHead(0, 1);
    feedPrompt(&analysis, tokens);
    QCOMPARE(model.rowCount(), tokens);
    QCOMPARE(model.columnCount(), tokens);
    const QModelIndex index = model.index(row, column);
    const QVariant actual = index.data(HeatmapModel::WeightRole);
    QCOMPARE(actual.isValid(), weight.isValid());
    if (weight.isValid()) {
      QVERIFY(qAbs(actual.toDouble() - weight.toDouble()) < 1e-6);
      QCOMPARE(index.data(Qt::BackgroundRole).value<QColor>(), heatColor(actual.toDouble()));
    } else {
      QVERIFY(!index.data(Qt::BackgroundRole).isValid());
    }
    QCOMPARE(index.data().toString(), text);
  }

  void blankUntilTheHeadArrives() {
    PromptAnalysis analysis;
    HeatmapModel model;
    model.setAnalysis(&analysis);
    model.setHead(0, 0);  // head 0 is never sent
    feedPrompt(&analysis, 4);
    QCOMPARE(model.rowCount(), 4);
    QVERIFY(!model.hasWeights());
    QVERIFY(!model.index(2, 0).data(HeatmapModel::WeightRole).isValid());
    QSignalSpy changed(&model, &HeatmapModel::headChanged);
    model.setHead(0, 1);
    QVERIFY(model.hasWeights());
    QCOMPARE(changed.count(), 1);
  }

  void headersAreTokens_data() {
    QTest::addColumn<int>("orientation");
    QTest::addColumn<int>("section");
    QTest::addColumn<QString>("label");
    const QString dot(QChar(0x00B7));
    QTest::newRow("row: position and text") << int(Qt::Vertical) << 2 << "2 " + dot + "w2";
    QTest::newRow("column: text, space visible") << int(Qt::Horizontal) << 1 << dot + "w1";
    QTest::newRow("first token") << int(Qt::Horizontal) << 0 << "The";
  }

  void headersAreTokens() {
    QFETCH(int, orientation);
    QFETCH(int, section);
    QFETCH(QString, label);
    PromptAnalysis analysis;
    HeatmapModel model;
    model.setAnalysis(&analysis);
    feedPrompt(&analysis, 4);
    QCOMPARE(model.headerData(section, Qt::Orientation(orientation)).toString(), label);
  }

  // Hovering query 3 highlights its row, fades the others, and marks the keys
  // it gives >= 0.1 of its attention (all four: 4/7 and 1/7 each).
  void highlightedRowShowsWhatItReads_data() {
    QTest::addColumn<int>("tokens");
    QTest::addColumn<int>("row");
    QTest::addColumn<QList<int>>("readKeys");
    QTest::newRow("query 3 of 4") << 4 << 3 << QList<int>{0, 1, 2, 3};
    // Query 9 of 12: key 0 gets 4/13, the others 1/13 < 0.1.
    QTest::newRow("query 9 of 12 reads only the sink") << 12 << 9 << QList<int>{0};
  }

  void highlightedRowShowsWhatItReads() {
    QFETCH(int, tokens);
    QFETCH(int, row);
    QFETCH(QList<int>, readKeys);
    PromptAnalysis analysis;
    HeatmapModel model;
    model.setAnalysis(&analysis);
    model.setHead(0, 1);
    feedPrompt(&analysis, tokens);
    QSignalSpy headers(&model, &HeatmapModel::headerDataChanged);
    model.setHighlightedRow(row);
    QCOMPARE(headers.count(), 2);
    const double inRow = model.index(row, 0).data(HeatmapModel::WeightRole).toDouble();
    QCOMPARE(model.index(row, 0).data(Qt::BackgroundRole).value<QColor>(), heatColor(inRow));
    const double other = model.index(row - 1, 0).data(HeatmapModel::WeightRole).toDouble();
    QCOMPARE(model.index(row - 1, 0).data(Qt::BackgroundRole).value<QColor>(),
             faded(heatColor(other), 0.7));
    QList<int> read;
    for (int key = 0; key < tokens; ++key) {
      if (model.headerData(key, Qt::Horizontal, HeatmapModel::IsReadRole).toBool()) read << key;
    }
    QCOMPARE(read, readKeys);
    QVERIFY(model.headerData(row, Qt::Vertical, Qt::FontRole).value<QFont>().bold());
    QVERIFY(!model.headerData(row - 1, Qt::Vertical, Qt::FontRole).isValid());
    model.setHighlightedRow(-1);
    QCOMPARE(model.index(row - 1, 0).data(Qt::BackgroundRole).value<QColor>(), heatColor(other));
  }

  void resetClearsTheGrid() {
    PromptAnalysis analysis;
    HeatmapModel model;
    model.setAnalysis(&analysis);
    model.setHead(0, 1);
    feedPrompt(&analysis, 4);
    model.setHighlightedRow(2);
    analysis.reset();
    QCOMPARE(model.rowCount(), 0);
    QCOMPARE(model.highlightedRow(), -1);
  }
};

class SinkGridModelTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void layersArrive_data() {
    QTest::addColumn<QList<int>>("layerOrder");
    QTest::addColumn<int>("rows");
    QTest::addColumn<QList<int>>("blankRows");
    QTest::newRow("in order") << QList<int>{0, 1, 2} << 3 << QList<int>{};
    QTest::newRow("layer 2 before layer 1") << QList<int>{0, 2} << 3 << QList<int>{1};
    QTest::newRow("only layer 0") << QList<int>{0} << 1 << QList<int>{};
  }

  void layersArrive() {
    QFETCH(QList<int>, layerOrder);
    QFETCH(int, rows);
    QFETCH(QList<int>, blankRows);
    PromptAnalysis analysis;
    SinkGridModel model;
    model.setAnalysis(&analysis);
    QVERIFY(analysis.addEvent(tokens({"a", "b"})));
    QCOMPARE(model.rowCount(), 0);
    for (const int l : layerOrder) QVERIFY(analysis.addEvent(layer(l, {0.1 * l, 0.5, 0.96})));
    QCOMPARE(model.rowCount(), rows);
    QCOMPARE(model.columnCount(), 3);
    for (int l = 0; l < rows; ++l) {
      const QVariant value = model.index(l, 0).data(SinkGridModel::ValueRole);
      QCOMPARE(value.isValid(), !blankRows.contains(l));
      if (value.isValid()) QVERIFY(qAbs(value.toDouble() - 0.1 * l) < 1e-12);
    }
  }

  void cellText_data() {
    QTest::addColumn<int>("head");
    QTest::addColumn<QString>("text");
    QTest::addColumn<QString>("tooltipPart");
    QTest::newRow("head 1") << 1 << "0.50"
                            << "first-token mass: 0.250";
    QTest::newRow("head 2 rounds") << 2 << "0.96"
                                   << "layer 0, head 2";
  }

  void cellText() {
    QFETCH(int, head);
    QFETCH(QString, text);
    QFETCH(QString, tooltipPart);
    PromptAnalysis analysis;
    SinkGridModel model;
    model.setAnalysis(&analysis);
    QVERIFY(analysis.addEvent(tokens({"a", "b"})));
    QVERIFY(analysis.addEvent(layer(0, {0.0, 0.5, 0.96})));
    QCOMPARE(model.index(0, head).data().toString(), text);
    QVERIFY(model.index(0, head).data(Qt::ToolTipRole).toString().contains(tooltipPart));
    QCOMPARE(model.index(0, head).data(Qt::BackgroundRole).value<QColor>(),
             HeatScale().color(head == 1 ? 0.5 : 0.96));
    QCOMPARE(model.headerData(0, Qt::Vertical).toString(), QStringLiteral("L0"));
    QCOMPARE(model.headerData(head, Qt::Horizontal).toString(), QStringLiteral("H%1").arg(head));
  }

  // The heatmap's colour scale applies to the grid too: 24 x 14 heads of
  // small scores (~1/T at 2,000 tokens) are not blank under log.
  void colourScale_data() {
    QTest::addColumn<int>("kind");
    QTest::newRow("linear") << int(HeatScaleKind::Linear);
    QTest::newRow("sqrt") << int(HeatScaleKind::Sqrt);
    QTest::newRow("log") << int(HeatScaleKind::Log);
  }

  void colourScale() {
    QFETCH(int, kind);
    PromptAnalysis analysis;
    SinkGridModel model;
    model.setAnalysis(&analysis);
    QVERIFY(analysis.addEvent(tokens({"a", "b"})));
    QVERIFY(analysis.addEvent(layer(0, {0.0005, 0.02, 0.96})));
    QSignalSpy changed(&model, &QAbstractItemModel::dataChanged);
    model.setScale(HeatScaleKind(kind));
    QCOMPARE(model.scale(), HeatScaleKind(kind));
    QCOMPARE(changed.size(), kind == int(HeatScaleKind::Linear) ? 0 : 1);
    const HeatScale scale{HeatScaleKind(kind)};
    for (int head = 0; head < 3; ++head) {
      const double score = model.index(0, head).data(SinkGridModel::ValueRole).toDouble();
      QCOMPARE(model.index(0, head).data(Qt::BackgroundRole).value<QColor>(), scale.color(score));
    }
    // 5e-4 under log sits a sixth of the way up the scale: visibly blue.
    const QColor small = model.index(0, 0).data(Qt::BackgroundRole).value<QColor>();
    if (kind == int(HeatScaleKind::Log)) QVERIFY2(small.red() < 240, qPrintable(small.name()));
    // Per row: each layer relative to its own highest score.
    model.setRowNormalised(true);
    QCOMPARE(model.index(0, 1).data(Qt::BackgroundRole).value<QColor>(),
             scale.color(0.02 / 0.96));
    QCOMPARE(model.index(0, 2).data(Qt::BackgroundRole).value<QColor>(), scale.color(1.0));
  }
};

ATTNSCOPE_REGISTER_TEST(HeatmapModelTest)
ATTNSCOPE_REGISTER_TEST(SinkGridModelTest)

}  // namespace attnscope::dashboard

#include "grid_models_test.moc"
