// The dashboard at the size users have (issue 31): a real attnscope-server
// serving a random GPT-2-shaped checkpoint with 24 layers x 14 heads (the
// Qwen2.5-0.5B grid) and 2,048 positions, a 2,000-token prompt, a generation
// of 24 tokens, and long lines (model name, status, notes) in the real
// MainWindow on a 1280 x 720 offscreen screen. The window never grows past
// its screen, byte fragments read as <0xNN>, token axes label what fits
// (full tokens on hover, the first token's label not cut at the corner), the
// heatmap's colour scale (linear, √, log, per row) comes with a legend and
// colours the sink grid too, time-axis labels never repeat, and a long model
// name is elided in the feed. The screenshot at 1600 x 1000 goes to
// <build>/test-output/dashboard-24x14-2000.png.
#include <QApplication>
#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QHeaderView>
#include <QLabel>
#include <QScreen>
#include <QSet>
#include <QSettings>
#include <QStatusBar>
#include <QTableView>
#include <QTemporaryDir>
#include <cmath>
#include <QtTest>

#include "client/models/heat_scale.h"
#include "client/models/sink_grid_model.h"
#include "client/ui/feed_panel.h"
#include "client/ui/heatmap_view.h"
#include "client/ui/main_window.h"
#include "client/ui/norm_chart.h"
#include "client/ui/color_bar.h"
#include "client/ui/entropy_chart.h"
#include "client/ui/prompt_summary_panel.h"
#include "client/ui/prompt_view.h"
#include "client/ui/send_panel.h"
#include "client/ui/trend_chart.h"
#include "tests/client/prompt_client.h"
#include "tests/client/random_checkpoint.h"
#include "tests/client/server_process.h"
#include "tests/client/window_test_support.h"

namespace attnscope::dashboard {
namespace {

namespace v1 = attnscope::v1;
using testing::PromptClient;
using testing::RandomGpt2;
using testing::ServerProcess;

constexpr int kLong = 300000;  // ms: a 2,000-token pass over 24 x 14 heads on a busy 2-core machine
constexpr int kTokens = 2000;
// A model name as long as real ones get ("Qwen/Qwen2.5-0.5B-Instruct" and a revision).
const char* const kModel = "Qwen2.5-0.5B-Instruct-shaped-random-24x14-heads-2048-positions";

QString outputDir() {
  const QString dir = QStringLiteral(ATTNSCOPE_TEST_OUTPUT_DIR);
  QDir().mkpath(dir);
  return dir;
}

using testing::fastReconnect;

int findRow(const FeedModel& feed, const QString& preview) {
  for (int i = 0; i < feed.rowCount(); ++i) {
    if (feed.rowAt(i)->promptPreview == preview) return i;
  }
  return -1;
}

bool finishedRow(const FeedModel& feed, const QString& preview) {
  const int row = findRow(feed, preview);
  return row >= 0 && feed.rowAt(row)->state != FeedRow::State::Running;
}

void selectFeedRow(MainWindow* window, int sourceRow) {
  FeedPanel* panel = window->feedPanel();
  panel->selectRow(panel->proxy()->mapFromSource(window->feedModel()->index(sourceRow, 0)).row());
}

// A few characters GPT-2 splits into byte fragments (日 is <0xE6><0x97>
// <0xA5>), then words of two tokens each: 2,001 tokens with GPT-2's tokenizer.
QString promptText() {
  QStringList parts;
  parts << QString::fromUtf8("日本語 — attention sinks at real size:");
  for (int i = 0; i < 994; ++i) parts << QStringLiteral("token%1").arg(i % 97);
  return parts.join(QLatin1Char(' '));
}

QString sizeText(const QSize& size) {
  return QStringLiteral("%1 x %2").arg(size.width()).arg(size.height());
}

bool fits(const QSize& size, const QRect& screen) {
  return size.width() <= screen.width() && size.height() <= screen.height();
}

QString rectText(const QRect& r) {
  return QStringLiteral("%1,%2 %3x%4").arg(r.x()).arg(r.y()).arg(r.width()).arg(r.height());
}

}  // namespace

class DashboardRealSizeTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(testing::useTestSettings(m_settingsDir, QStringLiteral("dashboard-real-size")));
    QVERIFY(m_models.isValid());
    RandomGpt2 shape;
    shape.layers = 24;
    shape.heads = 14;
    shape.width = 56;
    shape.positions = 2048;
    shape.seed = 29;
    QCOMPARE(testing::writeRandomGpt2(m_models.path(), shape), QString());
    QVERIFY2(m_server.start(0, kLong,
                            {QStringLiteral("--model"),
                             QLatin1String(kModel) + QLatin1Char('=') + m_models.path()}),
             qPrintable(m_server.error()));
  }

  void realSizeFitsReadsAndScales();

 private:
  QTemporaryDir m_settingsDir;
  QTemporaryDir m_models;
  ServerProcess m_server;
};

void DashboardRealSizeTest::realSizeFitsReadsAndScales() {
  const QRect screen = QGuiApplication::primaryScreen()->availableGeometry();
  qInfo("screen: %s", qPrintable(sizeText(screen.size())));
  MainWindow window(m_server.address(), fastReconnect());
  window.show();
  QVERIFY(QTest::qWaitForWindowExposed(&window));
  QTRY_COMPARE_WITH_TIMEOUT(window.subscriptions(), 1, 90000);
  // The default size is the screen's at most.
  QVERIFY2(fits(window.frameGeometry().size(), screen), qPrintable(sizeText(window.size())));
  const QSize initial = window.size();

  // Another client analyzes the first kTokens tokens of a long text.
  PromptClient client(m_server.address());
  QVector<v1::AnalyzeEvent> events;
  const QString text = promptText();
  v1::AnalyzeRequest request;
  request.set_model(kModel);
  request.set_text(text.toStdString());
  request.mutable_options()->set_hidden_state_norms(true);
  QCOMPARE(client.analyzeRequest(request, &events), QStringLiteral("OK"));
  const int tokens = events.first().tokens().ids_size();
  qInfo("prompt: %d tokens", tokens);
  QVERIFY2(tokens >= kTokens && tokens <= 2048, qPrintable(QString::number(tokens)));
  const QString preview = text.left(80);
  QTRY_VERIFY_WITH_TIMEOUT(findRow(*window.feedModel(), preview) >= 0 &&
                               finishedRow(*window.feedModel(), preview),
                           20000);
  selectFeedRow(&window, findRow(*window.feedModel(), preview));
  PromptView* view = window.promptView();
  QVERIFY(window.analysis()->isComplete());
  QCOMPARE(view->sinkGridModel()->rowCount(), 24);
  QCOMPARE(view->sinkGridModel()->columnCount(), 14);
  QTRY_VERIFY_WITH_TIMEOUT(view->heatmapModel()->hasWeights(), kLong);

  // Byte fragments read as <0xNN>, never as U+FFFD.
  bool sawFragment = false;
  for (int i = 0; i < 8; ++i) {
    const QString label = view->heatmapModel()->headerData(i, Qt::Vertical).toString();
    QVERIFY2(!label.contains(QChar(0xFFFD)), qPrintable(label));
    sawFragment = sawFragment || label.contains(QStringLiteral("<0xE6>"));
  }
  QVERIFY(sawFragment);

  // Long lines: a generation, a long status and a long note.
  window.generateFromPrompt(QString::fromUtf8("日本語 — generate at real size"), kModel, 24);
  QTRY_VERIFY2_WITH_TIMEOUT(
      window.sendPanel()->statusText().startsWith(QStringLiteral("generated")),
      qPrintable(window.sendPanel()->statusText() + QStringLiteral(" | ") +
                 window.promptView()->summaryPanel()->noteText()),
      kLong);
  const QString unbroken = QStringLiteral("x").repeated(600);
  window.sendPanel()->setStatus(QStringLiteral("Analyze failed: ") + unbroken, true);
  window.statusBar()->showMessage(unbroken);
  QTest::qWait(200);  // layouts settle through posted events
  qInfo("window %s, minimum %s", qPrintable(sizeText(window.size())),
        qPrintable(sizeText(window.minimumSizeHint())));
  QVERIFY2(fits(window.frameGeometry().size(), screen), qPrintable(sizeText(window.size())));
  QCOMPARE(window.size(), initial);
  QVERIFY2(fits(window.minimumSizeHint(), screen), qPrintable(sizeText(window.minimumSizeHint())));

  // Back to the 2,000-token prompt (by way of the generation's row: the
  // feed's selection never moved): every axis labels what fits.
  const QString generated = QString::fromUtf8("日本語 — generate at real size");
  QTRY_VERIFY_WITH_TIMEOUT(finishedRow(*window.feedModel(), generated), 20000);
  selectFeedRow(&window, findRow(*window.feedModel(), generated));
  selectFeedRow(&window, findRow(*window.feedModel(), preview));
  QCOMPARE(window.analysis()->tokenCount(), tokens);
  QTRY_VERIFY_WITH_TIMEOUT(view->heatmapModel()->hasWeights(), kLong);
  HeatmapView* heatmap = view->heatmapView();
  // The axes leave the cells most of the panel on a 720-px screen.
  QTRY_VERIFY2(heatmap->viewport()->height() >= heatmap->height() / 2,
               qPrintable(QStringLiteral("cells %1 px high in a %2-px heatmap")
                              .arg(heatmap->viewport()->height())
                              .arg(heatmap->height())));
  for (TokenHeaderView* axis : {heatmap->keyAxis(), heatmap->queryAxis()}) {
    QVERIFY(axis->isVisible());
    QVERIFY2(axis->labelStep() > 1 &&
                 axis->labelStep() * heatmap->currentCellSize() >= axis->fontMetrics().height(),
             qPrintable(QStringLiteral("step %1, cell %2 px")
                            .arg(axis->labelStep())
                            .arg(heatmap->currentCellSize())));
  }
  // The full token on hover, byte fragments spelled out.
  QCOMPARE(view->heatmapModel()->headerData(1, Qt::Horizontal, Qt::ToolTipRole).toString(),
           QStringLiteral("1 <0xA5>"));
  QCOMPARE(view->normChart()->barCount(), tokens);
  QTRY_VERIFY(view->normChart()->labelStep() >= 20);  // 2,001 bars in a few hundred px
  QVERIFY(view->entropyChart()->labelStep() >= 20);
  const QString small = outputDir() + QStringLiteral("/dashboard-24x14-2000-1280x720.png");
  QVERIFY2(window.grab().save(small), qPrintable(small));
  // The first token's labels sit inside the axes at the top-left corner.
  for (TokenHeaderView* axis : {heatmap->keyAxis(), heatmap->queryAxis()}) {
    QTRY_VERIFY2(axis->viewport()->rect().contains(axis->labelRect(0)),
             qPrintable(rectText(axis->labelRect(0)) + QStringLiteral(" in ") +
                        rectText(axis->viewport()->rect())));
  }

  // One analysis, a second of room either side: the time labels never repeat.
  const QStringList times = window.trendChart()->timeLabels();
  qInfo("time axis: %s", qPrintable(times.join(QStringLiteral(", "))));
  QVERIFY(times.size() >= 2);
  QCOMPARE(QSet<QString>(times.begin(), times.end()).size(), times.size());

  // The long model name is elided in the feed, whole in its tooltip; no
  // column is pushed out of sight.
  QTableView* table = window.feedPanel()->table();
  QVERIFY2(table->horizontalHeader()->length() <= table->viewport()->width(),
           qPrintable(QStringLiteral("%1 px of columns in %2 px")
                          .arg(table->horizontalHeader()->length())
                          .arg(table->viewport()->width())));
  QVERIFY(table->model()->index(0, FeedModel::Model).data(Qt::ToolTipRole).toString().contains(
      QLatin1String(kModel)));

  // The colour scale from the controls, with its legend; the grid's legend.
  HeatmapModel* cells = view->heatmapModel();
  const QModelIndex cell = cells->index(tokens - 1, tokens / 2);
  const double w = cell.data(HeatmapModel::WeightRole).toDouble();
  QVERIFY(view->sinkGridLegend()->isVisible());
  QCOMPARE(view->sinkGridLegend()->caption(), QStringLiteral("sink score"));
  QCOMPARE(view->sinkGridLegend()->shownCaption(), QStringLiteral("sink score"));
  QCOMPARE(view->heatmapLegend()->tickLabels(),
           QStringList({"0", ".25", ".5", ".75", "1"}));
  view->scaleCombo()->setCurrentIndex(view->scaleCombo()->findData(int(HeatScaleKind::Log)));
  QCOMPARE(cells->scale(), HeatScaleKind::Log);
  QCOMPARE(view->heatmapLegend()->tickLabels(),
           QStringList({"1e-4", "1e-3", ".01", ".1", "1"}));
  // The grid takes the same scale.
  QCOMPARE(view->sinkGridModel()->scale(), HeatScaleKind::Log);
  QCOMPARE(view->sinkGridLegend()->tickLabels(), view->heatmapLegend()->tickLabels());
  view->scaleCombo()->setCurrentIndex(view->scaleCombo()->findData(int(HeatScaleKind::Sqrt)));
  view->rowNormaliseCheck()->setChecked(true);
  QVERIFY(cells->isRowNormalised());
  QCOMPARE(view->heatmapLegend()->caption(), QStringLiteral("weight / row peak"));
  double peak = 0.0;
  for (int key = 0; key < tokens; ++key)
    peak = qMax(peak, cells->index(tokens - 1, key).data(HeatmapModel::WeightRole).toDouble());
  const double expected = std::sqrt(w / peak);
  const double shown = cell.data(HeatmapModel::ScaledRole).toDouble();
  QVERIFY2(std::abs(shown - expected) <= 1e-9,
           qPrintable(QStringLiteral("%1 vs %2").arg(shown).arg(expected)));

  // The screenshot on the log scale, per row: diffuse heads and the grid show.
  view->scaleCombo()->setCurrentIndex(view->scaleCombo()->findData(int(HeatScaleKind::Log)));
  // The grid's scores at 2,000 tokens sit mostly below the log scale's
  // floor; per row (each layer over its peak) every layer shows its peak
  // head in the scale's top colour, and each cell has its scaled colour.
  SinkGridModel* grid = view->sinkGridModel();
  QVERIFY(grid->isRowNormalised());
  QCOMPARE(view->sinkGridLegend()->shownCaption(), QStringLiteral("sink / layer peak"));
  QCOMPARE(grid->rowCount(), 24);
  const HeatScale logScale(HeatScaleKind::Log);
  int blank = 0;
  for (int l = 0; l < grid->rowCount(); ++l) {
    double peakScore = 0.0;
    int peakHead = -1;
    for (int h = 0; h < grid->columnCount(); ++h) {
      const double s = grid->index(l, h).data(SinkGridModel::ValueRole).toDouble();
      if (s > peakScore) {
        peakScore = s;
        peakHead = h;
      }
    }
    QVERIFY2(peakHead >= 0, qPrintable(QStringLiteral("layer %1 has no positive score").arg(l)));
    for (int h = 0; h < grid->columnCount(); ++h) {
      const double s = grid->index(l, h).data(SinkGridModel::ValueRole).toDouble();
      const QColor c = grid->index(l, h).data(Qt::BackgroundRole).value<QColor>();
      QCOMPARE(c, logScale.color(s / peakScore));
      if (c.red() >= 250 && c.green() >= 250 && c.blue() >= 250) ++blank;
    }
    QCOMPARE(grid->index(l, peakHead).data(Qt::BackgroundRole).value<QColor>(),
             logScale.color(1.0));
  }
  qInfo("sink grid under log, per layer: %d of %d cells near white (random weights: a few "
        "heads per layer take most of the last token's first-token weight)", blank, 24 * 14);
  // The README's picture: the long status lines were only for the fit check.
  window.statusBar()->clearMessage();
  window.sendPanel()->setStatus(QString());
  window.resize(1600, 1000);
  QTest::qWait(200);
  const QString path = outputDir() + QStringLiteral("/dashboard-24x14-2000.png");
  QVERIFY2(window.grab().save(path), qPrintable(path));
  qInfo("screenshot: %s", qPrintable(path));
}

}  // namespace attnscope::dashboard

// A 1280 x 720 screen (the smallest laptops) unless the caller chose a platform.
int main(int argc, char** argv) {
  QTemporaryDir configDir;
  const QByteArray platform = qgetenv("QT_QPA_PLATFORM");
  if (platform == "offscreen" && configDir.isValid()) {
    const QString config = configDir.filePath(QStringLiteral("screens.json"));
    QFile file(config);
    if (file.open(QIODevice::WriteOnly)) {
      file.write(R"({"screens": [{"name": "laptop", "x": 0, "y": 0, "width": 1280,
                   "height": 720, "logicalDpi": 96, "logicalBaseDpi": 96, "dpr": 1}]})");
      file.close();
      qputenv("QT_QPA_PLATFORM", "offscreen:configfile=" + config.toUtf8());
    }
  }
  // A 2,000-token pass over 24 x 14 heads can take longer than QtTest's
  // default 5-minute watchdog on a busy machine; CTest's TIMEOUT still bounds it.
  if (qEnvironmentVariableIsEmpty("QTEST_FUNCTION_TIMEOUT")) qputenv("QTEST_FUNCTION_TIMEOUT", "1150000");
  QApplication app(argc, argv);
  attnscope::dashboard::DashboardRealSizeTest test;
  QTEST_SET_MAIN_SOURCE_PATH
  return QTest::qExec(&test, argc, argv);
}

#include "dashboard_real_size_test.moc"
