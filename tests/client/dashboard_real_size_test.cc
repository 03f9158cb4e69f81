// The dashboard at the size users have (issue 31): a real attnscope-server
// serving a random GPT-2-shaped checkpoint with 24 layers x 14 heads (the
// Qwen2.5-0.5B grid) and 2,048 positions, a 2,000-token prompt, a generation
// of 24 tokens, and long lines (model name, status, notes) in the real
// MainWindow on a 1366 x 768 offscreen screen. The window never grows past
// its screen, byte fragments read as <0xNN>, token axes label what fits
// (full tokens on hover), the heatmap's colour scale (linear, √, log, per
// row) comes with a legend, and so does the sink grid. The screenshot at
// 1600 x 1000 goes to
// <build>/test-output/dashboard-24x14-2000.png.
#include <QApplication>
#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QHeaderView>
#include <QLabel>
#include <QScreen>
#include <QSettings>
#include <QStatusBar>
#include <QTableView>
#include <QTemporaryDir>
#include <cmath>
#include <QtTest>

#include "client/ui/feed_panel.h"
#include "client/ui/heatmap_view.h"
#include "client/ui/main_window.h"
#include "client/ui/norm_chart.h"
#include "client/ui/color_bar.h"
#include "client/ui/entropy_chart.h"
#include "client/ui/prompt_summary_panel.h"
#include "client/ui/prompt_view.h"
#include "tests/client/prompt_client.h"
#include "tests/client/random_checkpoint.h"
#include "tests/client/server_process.h"

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

ConnectionOptions fastReconnect() {
  ConnectionOptions options;
  options.initialBackoffMs = 100;
  options.maxBackoffMs = 1000;
  options.probeTimeoutMs = 2000;
  return options;
}

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

}  // namespace

class DashboardRealSizeTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(m_settingsDir.isValid());
    QCoreApplication::setOrganizationName(QStringLiteral("attnscope-test"));
    QCoreApplication::setApplicationName(QStringLiteral("dashboard-real-size"));
    QSettings::setPath(QSettings::NativeFormat, QSettings::UserScope, m_settingsDir.path());
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
  QTRY_VERIFY_WITH_TIMEOUT(window.sendPanel()->statusText().startsWith(QStringLiteral("generated")),
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

  // The colour scale from the controls, with its legend; the grid's legend.
  HeatmapModel* cells = view->heatmapModel();
  const QModelIndex cell = cells->index(tokens - 1, tokens / 2);
  const double w = cell.data(HeatmapModel::WeightRole).toDouble();
  QVERIFY(view->sinkGridLegend()->isVisible());
  QCOMPARE(view->sinkGridLegend()->caption(), QStringLiteral("sink score"));
  QCOMPARE(view->heatmapLegend()->tickLabels(),
           QStringList({"0", ".25", ".5", ".75", "1"}));
  view->scaleCombo()->setCurrentIndex(view->scaleCombo()->findData(int(HeatScaleKind::Log)));
  QCOMPARE(cells->scale(), HeatScaleKind::Log);
  QCOMPARE(view->heatmapLegend()->tickLabels(),
           QStringList({"1e-4", "1e-3", ".01", ".1", "1"}));
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

  window.resize(1600, 1000);
  QTest::qWait(200);
  const QString path = outputDir() + QStringLiteral("/dashboard-24x14-2000.png");
  QVERIFY2(window.grab().save(path), qPrintable(path));
  qInfo("screenshot: %s", qPrintable(path));
}

}  // namespace attnscope::dashboard

// A 1366 x 768 screen (a small laptop) unless the caller chose a platform.
int main(int argc, char** argv) {
  QTemporaryDir configDir;
  const QByteArray platform = qgetenv("QT_QPA_PLATFORM");
  if (platform == "offscreen" && configDir.isValid()) {
    const QString config = configDir.filePath(QStringLiteral("screens.json"));
    QFile file(config);
    if (file.open(QIODevice::WriteOnly)) {
      file.write(R"({"screens": [{"name": "laptop", "x": 0, "y": 0, "width": 1366,
                   "height": 768, "logicalDpi": 96, "logicalBaseDpi": 96, "dpr": 1}]})");
      file.close();
      qputenv("QT_QPA_PLATFORM", "offscreen:configfile=" + config.toUtf8());
    }
  }
  QApplication app(argc, argv);
  attnscope::dashboard::DashboardRealSizeTest test;
  QTEST_SET_MAIN_SOURCE_PATH
  return QTest::qExec(&test, argc, argv);
}

#include "dashboard_real_size_test.moc"
