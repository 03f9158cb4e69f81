// The dashboard's widgets on their own, offscreen and without a server: the
// trend chart's time axis, the heatmap's token axes at the corner, the sink
// grid's colour scale and legend, and the feed's Model column with a long
// model name (issue 31 items 2 and 7, at the sizes users have).
#include <QApplication>
#include <QComboBox>
#include <QDateTimeAxis>
#include <QHeaderView>
#include <QSet>
#include <QTableView>
#include <QtTest>

#include "client/models/feed_model.h"
#include "client/ui/color_bar.h"
#include "client/ui/feed_panel.h"
#include "client/ui/heatmap_view.h"
#include "client/ui/prompt_view.h"
#include "client/ui/trend_chart.h"
#include "tests/client/event_builders.h"

namespace attnscope::dashboard {
namespace {

namespace t = attnscope::dashboard::testing;

QVector<TrendPoint> pointsAt(const QDateTime& start, const QVector<qint64>& offsetsMs) {
  QVector<TrendPoint> points;
  for (const qint64 offset : offsetsMs) {
    TrendPoint p;
    p.time = start.addMSecs(offset);
    p.health = 8.0;
    points << p;
  }
  return points;
}

// A prompt of n tokens whose first is a byte fragment, as GPT-2 splits 日.
QStringList promptTokens(int n) {
  QStringList texts{QStringLiteral("\xE6\x97")};
  for (int i = 1; i < n; ++i) texts << QStringLiteral(" w%1").arg(i);
  return texts;
}

}  // namespace

class DashboardWidgetsTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void trendTimeLabelsAreDistinct_data();
  void trendTimeLabelsAreDistinct();
  void heatmapCornerLabelsStayInside();
  void sinkGridFollowsTheColourScale();
  void sinkGridLegendCaptionIsWhole();
  void feedModelColumnElidesLongNames();
};

void DashboardWidgetsTest::trendTimeLabelsAreDistinct_data() {
  QTest::addColumn<QVector<qint64>>("offsets");
  QTest::newRow("none") << QVector<qint64>{};
  QTest::newRow("one point") << QVector<qint64>{0};
  QTest::newRow("a burst of 1.2 s") << QVector<qint64>{0, 400, 1200};
  QTest::newRow("3 s") << QVector<qint64>{0, 3000};
  QTest::newRow("90 s") << QVector<qint64>{0, 30000, 90000};
  QTest::newRow("17 min") << QVector<qint64>{0, 17 * 60000};
  QTest::newRow("2 h") << QVector<qint64>{0, 7200000};
  QTest::newRow("3 days") << QVector<qint64>{0, 3 * 86400000LL};
}

void DashboardWidgetsTest::trendTimeLabelsAreDistinct() {
  QFETCH(QVector<qint64>, offsets);
  TrendChart chart;
  chart.resize(600, 220);
  const QDateTime start(QDate(2024, 12, 5), QTime(7, 27, 51, 300));
  chart.setTrends(pointsAt(start, offsets));
  const QStringList labels = chart.timeLabels();
  QVERIFY2(labels.size() >= 2, qPrintable(labels.join(QLatin1String(", "))));
  QVERIFY2(labels.size() <= 6, qPrintable(labels.join(QLatin1String(", "))));
  QCOMPARE(QSet<QString>(labels.begin(), labels.end()).size(), labels.size());
  // Every point lies inside the axis.
  auto* axis = qobject_cast<QDateTimeAxis*>(chart.chart()->axes(Qt::Horizontal).first());
  for (const qint64 offset : offsets) {
    QVERIFY(axis->min() <= start.addMSecs(offset));
    QVERIFY(axis->max() >= start.addMSecs(offset));
  }
}

void DashboardWidgetsTest::heatmapCornerLabelsStayInside() {
  PromptAnalysis analysis;
  QVERIFY(analysis.addEvent(t::tokens(promptTokens(400))));
  HeatmapModel model;
  model.setAnalysis(&analysis);
  HeatmapView view;
  view.setHeatmapModel(&model);
  view.resize(500, 400);
  view.show();
  QVERIFY(QTest::qWaitForWindowExposed(&view));
  for (TokenHeaderView* axis : {view.keyAxis(), view.queryAxis()}) {
    const QRect inside = axis->viewport()->rect();
    const QRect first = axis->labelRect(0);
    QVERIFY2(inside.contains(first),
             qPrintable(QStringLiteral("label 0 at %1,%2 %3x%4 in %5x%6")
                            .arg(first.x())
                            .arg(first.y())
                            .arg(first.width())
                            .arg(first.height())
                            .arg(inside.width())
                            .arg(inside.height())));
  }
}

void DashboardWidgetsTest::sinkGridFollowsTheColourScale() {
  PromptView view;
  QComboBox* combo = view.scaleCombo();
  combo->setCurrentIndex(combo->findData(int(HeatScaleKind::Log)));
  QCOMPARE(view.sinkGridModel()->scale(), HeatScaleKind::Log);
  QCOMPARE(view.sinkGridLegend()->scale(), HeatScaleKind::Log);
  combo->setCurrentIndex(combo->findData(int(HeatScaleKind::Sqrt)));
  QCOMPARE(view.sinkGridModel()->scale(), HeatScaleKind::Sqrt);
  QCOMPARE(view.sinkGridLegend()->scale(), HeatScaleKind::Sqrt);
}

void DashboardWidgetsTest::sinkGridLegendCaptionIsWhole() {
  // The grid's panel as narrow as the window gives it on a small screen.
  PromptView view;
  view.resize(560, 600);
  view.show();
  QVERIFY(QTest::qWaitForWindowExposed(&view));
  ColorBar* legend = view.sinkGridLegend();
  qInfo("grid legend %d px wide", legend->width());
  QCOMPARE(legend->shownCaption(), QStringLiteral("sink score"));
  QVERIFY(legend->tickLabels().size() >= 2);
}

void DashboardWidgetsTest::feedModelColumnElidesLongNames() {
  const QString model =
      QStringLiteral("Qwen2.5-0.5B-Instruct-shaped-random-24x14-heads-2048-positions");
  FeedModel feed;
  QVERIFY(feed.apply(t::started(1, model, QStringLiteral("Analyze"),
                                QStringLiteral("attention sinks at real size"), 2001)));
  QVERIFY(feed.apply(t::finished(1, 8.0, 0, QStringLiteral("OK"), model)));
  FeedPanel panel(&feed);
  panel.addModelName(model);
  panel.resize(620, 300);
  panel.show();
  QVERIFY(QTest::qWaitForWindowExposed(&panel));
  QTableView* table = panel.table();
  QHeaderView* header = table->horizontalHeader();
  const int modelWidth = header->sectionSize(FeedModel::Model);
  qInfo("Model column %d px, all columns %d px in %d px", modelWidth, header->length(),
        table->viewport()->width());
  QVERIFY(modelWidth < table->fontMetrics().horizontalAdvance(model) / 2);
  QVERIFY(header->length() <= table->viewport()->width());
  const QModelIndex cell = panel.proxy()->index(0, FeedModel::Model);
  QVERIFY(cell.data(Qt::ToolTipRole).toString().contains(model));
  // The model filter does not grow with the name either.
  QVERIFY(panel.modelCombo()->sizeHint().width() <
          panel.fontMetrics().horizontalAdvance(model) / 2);
}

}  // namespace attnscope::dashboard

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  attnscope::dashboard::DashboardWidgetsTest test;
  QTEST_SET_MAIN_SOURCE_PATH
  return QTest::qExec(&test, argc, argv);
}

#include "dashboard_widgets_test.moc"
