// The dashboard on real model sizes: a real attnscope-server serving random
// GPT-2-shaped checkpoints with 12 x 12 and 32 x 32 heads (written at test
// time), the real MainWindow offscreen, and a separate gRPC client. Feed rows
// are shown from what the feed carries, heads are fetched one at a time as
// the dashboard's own requests, dense grids stay whole, long prompts scroll
// and zoom. Screenshots go to <build>/test-output/.
#include <QCheckBox>
#include <QDir>
#include <QFontMetrics>
#include <QHeaderView>
#include <QLabel>
#include <QPlainTextEdit>
#include <QScrollBar>
#include <QSettings>
#include <QTableView>
#include <QTemporaryDir>
#include <QtTest>

#include "client/ui/feed_panel.h"
#include "client/ui/heatmap_view.h"
#include "client/ui/main_window.h"
#include "client/ui/prompt_summary_panel.h"
#include "client/ui/prompt_view.h"
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

constexpr int kLong = 90000;  // ms: loading models on a busy 2-core machine

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

// Every column of the grid is inside the viewport (none cut off).
bool wholeGrid(QTableView* grid, int columns) {
  const QRect last = grid->visualRect(grid->model()->index(0, columns - 1));
  return last.isValid() && last.right() <= grid->viewport()->width() &&
         grid->horizontalScrollBar()->maximum() == 0;
}

v1::AnalyzeRequest optionsRequest(const QString& model, const QString& text) {
  v1::AnalyzeRequest request;
  request.set_model(model.toStdString());
  request.set_text(text.toStdString());
  request.mutable_options()->set_threshold(0.5);
  request.mutable_options()->set_template_("chatml");
  return request;
}

const v1::LayerStats* clientLayer(const QVector<v1::AnalyzeEvent>& events, int layer) {
  for (const auto& e : events) {
    if (e.has_layer() && e.layer().layer() == layer) return &e.layer();
  }
  return nullptr;
}

QString longText(int words) {
  QStringList parts;
  for (int i = 0; i < words; ++i) parts << QStringLiteral("word%1").arg(i % 37);
  return parts.join(QLatin1Char(' '));
}

}  // namespace

class DashboardScaleTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(testing::useTestSettings(m_settingsDir, QStringLiteral("dashboard-scale")));
    QVERIFY(m_models.isValid());
    QVERIFY(QDir(m_models.path()).mkpath(QStringLiteral("m12")));
    QVERIFY(QDir(m_models.path()).mkpath(QStringLiteral("m32")));
    RandomGpt2 twelve;
    QCOMPARE(testing::writeRandomGpt2(m_models.filePath(QStringLiteral("m12")), twelve), QString());
    RandomGpt2 llama;
    llama.layers = 32;
    llama.heads = 32;
    llama.width = 64;
    llama.positions = 256;
    llama.seed = 11;
    QCOMPARE(testing::writeRandomGpt2(m_models.filePath(QStringLiteral("m32")), llama), QString());
    QVERIFY2(
        m_server.start(0, kLong,
                       {QStringLiteral("--model"),
                        QStringLiteral("gpt2-12x12=") + m_models.filePath(QStringLiteral("m12")),
                        QStringLiteral("--model"),
                        QStringLiteral("grid-32x32=") + m_models.filePath(QStringLiteral("m32"))}),
        qPrintable(m_server.error()));
  }

  void twelveByTwelveRowShowsItsOwnNumbers();
  void longPromptScrollsAndZooms();
  void sendBoxTakesIdsAndShowsErrorsInPlace();
  void thirtyTwoByThirtyTwoGrid();

 private:
  QTemporaryDir m_settingsDir;
  QTemporaryDir m_models;
  ServerProcess m_server;
};

void DashboardScaleTest::twelveByTwelveRowShowsItsOwnNumbers() {
  MainWindow window(m_server.address(), fastReconnect());
  window.resize(1600, 1000);
  window.show();
  QVERIFY(QTest::qWaitForWindowExposed(&window));
  QTRY_COMPARE_WITH_TIMEOUT(window.subscriptions(), 1, kLong);

  // Another user analyzes with --threshold 0.5 --template chatml.
  const QString text = QStringLiteral(
      "<|im_start|>user\nWhere do attention sinks come from?<|im_end|>\n<|im_start|>assistant\n");
  PromptClient client(m_server.address());
  QVector<v1::AnalyzeEvent> events;
  v1::AnalyzeRequest request = optionsRequest(QStringLiteral("gpt2-12x12"), text);
  request.mutable_options()->set_return_attention(true);
  request.mutable_options()->add_attention_layers(11);
  QCOMPARE(client.analyzeRequest(request, &events), QStringLiteral("OK"));
  const v1::Summary& summary = events.last().summary();
  const QString preview = text.left(80);
  QTRY_VERIFY_WITH_TIMEOUT(finishedRow(*window.feedModel(), preview), 10000);
  const int rows = window.feedModel()->rowCount();

  selectFeedRow(&window, findRow(*window.feedModel(), preview));
  // Shown from the feed: complete at once, with the row's own numbers.
  QVERIFY(window.analysis()->isComplete());
  QCOMPARE(window.analysis()->summary()->health(), summary.health());
  QCOMPARE(window.analysis()->summary()->sinks_size(), summary.sinks_size());
  QCOMPARE(window.analysis()->summary()->threshold(), 0.5);
  QCOMPARE(window.analysis()->summary()->template_(), summary.template_());
  PromptView* view = window.promptView();
  QVERIFY(view->summaryPanel()->healthText().startsWith(QString::number(summary.health(), 'f', 1)));
  QCOMPARE(view->sinkGridModel()->rowCount(), 12);
  QCOMPARE(view->sinkGridModel()->columnCount(), 12);

  // One head fetched, then another on demand; neither becomes a feed row.
  QTRY_VERIFY_WITH_TIMEOUT(view->heatmapModel()->hasWeights(), 20000);
  QCOMPARE(window.attentionFetches(), 1);
  const int tokens = events.first().tokens().ids_size();
  view->openHead(11, 11);
  QTRY_VERIFY_WITH_TIMEOUT(view->heatmapModel()->hasWeights(), 20000);
  QCOMPARE(window.attentionFetches(), 2);
  const double cell =
      view->heatmapModel()->index(tokens - 1, 0).data(HeatmapModel::WeightRole).toDouble();
  QVERIFY2(qAbs(cell - clientLayer(events, 11)->sink_score(11)) < 1e-5,
           qPrintable(QString::number(cell)));
  view->openHead(0, 0);  // fetched already: no new request
  QVERIFY(view->heatmapModel()->hasWeights());
  QCOMPARE(window.attentionFetches(), 2);
  QTRY_VERIFY(window.feedModel()->dashboardRequests() >= 2);
  QCOMPARE(window.feedModel()->rowCount(), rows);

  // The 12 x 12 grid: every column visible; values printed only if they fit.
  QTableView* grid = view->sinkGridView();
  QTRY_VERIFY(wholeGrid(grid, 12));
  if (view->sinkGridModel()->isLabelled()) QVERIFY(grid->columnWidth(11) >= 36);
  QCOMPARE(view->sinkGridModel()->headerData(11, Qt::Horizontal, Qt::ToolTipRole).toString(),
           QStringLiteral("head 11"));

  // Follow latest: the next request shows by itself; trends collect them.
  window.feedPanel()->setFollowing(true);
  const QString next = QStringLiteral("The sink moves when the prompt changes its first token.");
  QVector<v1::AnalyzeEvent> more;
  QCOMPARE(client.analyzeRequest(optionsRequest(QStringLiteral("gpt2-12x12"), next), &more),
           QStringLiteral("OK"));
  QTRY_COMPARE_WITH_TIMEOUT(window.analysis()->promptText(), next, 10000);
  QVERIFY(window.analysis()->isComplete());
  QTRY_COMPARE(window.trends().size(), 2);
  QCOMPARE(window.trendChart()->pointCount(0), 2);
  QCOMPARE(window.trends().points().last().health, more.last().summary().health());
  window.feedPanel()->setFollowing(false);
  QTRY_VERIFY_WITH_TIMEOUT(view->heatmapModel()->hasWeights(), 20000);

  selectFeedRow(&window, findRow(*window.feedModel(), preview));
  view->openHead(3, 5);
  QTRY_VERIFY_WITH_TIMEOUT(view->heatmapModel()->hasWeights(), 20000);
  const QString path = outputDir() + QStringLiteral("/dashboard-12x12.png");
  QVERIFY2(window.grab().save(path), qPrintable(path));
  qInfo("screenshot: %s", qPrintable(path));
}

void DashboardScaleTest::longPromptScrollsAndZooms() {
  MainWindow window(m_server.address(), fastReconnect());
  window.resize(1600, 1000);
  window.show();
  QTRY_COMPARE_WITH_TIMEOUT(window.subscriptions(), 1, kLong);
  const QString text = longText(300);  // "wordN" is two tokens: ~600
  PromptClient client(m_server.address());
  QVector<v1::AnalyzeEvent> events;
  v1::AnalyzeRequest request;
  request.set_model("gpt2-12x12");
  request.set_text(text.toStdString());
  QCOMPARE(client.analyzeRequest(request, &events), QStringLiteral("OK"));
  const int tokens = events.first().tokens().ids_size();
  QVERIFY2(tokens >= 512, qPrintable(QString::number(tokens)));
  QTRY_VERIFY_WITH_TIMEOUT(finishedRow(*window.feedModel(), text.left(80)), 10000);
  selectFeedRow(&window, findRow(*window.feedModel(), text.left(80)));
  PromptView* view = window.promptView();
  QTRY_VERIFY_WITH_TIMEOUT(view->heatmapModel()->hasWeights(), 30000);
  HeatmapView* heatmap = view->heatmapView();
  QCOMPARE(heatmap->currentCellSize(), HeatmapView::cellSize(tokens));
  QVERIFY(heatmap->horizontalScrollBar()->maximum() > 0);  // scrolls
  // 2 px a cell: both axes stay, labelling every step-th token, a line apart.
  QVERIFY(!heatmap->verticalHeader()->isHidden());
  QVERIFY(heatmap->queryAxis()->labelStep() > 1);
  QVERIFY(heatmap->queryAxis()->labelStep() * heatmap->currentCellSize() >=
          heatmap->queryAxis()->fontMetrics().height());
  QCOMPARE(heatmap->model()->headerData(7, Qt::Horizontal, Qt::ToolTipRole).toString().left(2),
           QStringLiteral("7 "));
  QVERIFY(heatmap->model()->index(tokens - 1, 0).data(Qt::ToolTipRole).toString().size() > 0);
  const int before = heatmap->horizontalScrollBar()->maximum();
  heatmap->setFocus();
  QTest::keyClick(heatmap, Qt::Key_Plus, Qt::ControlModifier);
  QVERIFY(heatmap->currentCellSize() > HeatmapView::cellSize(tokens));
  QTRY_VERIFY(heatmap->horizontalScrollBar()->maximum() > before);
  const int thinned = heatmap->queryAxis()->labelStep();
  heatmap->setZoom(4.0);  // 8 px a cell: more of the tokens are labelled
  QVERIFY(heatmap->queryAxis()->labelStep() < thinned);
  heatmap->setZoom(0.01);  // clamped: one pixel a cell
  QCOMPARE(heatmap->currentCellSize(), 1);
  heatmap->setZoom(1.0);
  QCOMPARE(heatmap->currentCellSize(), HeatmapView::cellSize(tokens));
  const QString path = outputDir() + QStringLiteral("/dashboard-12x12-long.png");
  QVERIFY2(window.grab().save(path), qPrintable(path));
}

void DashboardScaleTest::sendBoxTakesIdsAndShowsErrorsInPlace() {
  MainWindow window(m_server.address(), fastReconnect());
  window.resize(1600, 1000);
  window.show();
  QTRY_COMPARE_WITH_TIMEOUT(window.connectionState(), Connection::State::Connected, kLong);
  SendPanel* send = window.sendPanel();
  send->setTokenIds(true);
  send->setPromptText(QStringLiteral("464,,3797"));
  const int rows = window.feedModel()->rowCount();
  send->send();
  QVERIFY2(send->statusText().contains(QStringLiteral("token id 2 is empty")),
           qPrintable(send->statusText()));
  QCOMPARE(window.feedModel()->rowCount(), rows);  // nothing was sent

  send->setPromptText(QStringLiteral("464, 3797, 3332, 319"));
  send->send();
  QTRY_VERIFY_WITH_TIMEOUT(window.analysis()->isComplete(), 20000);
  QCOMPARE(window.analysis()->tokenCount(), 4);
  QCOMPARE(window.analysis()->token(0).id, qint64(464));
  QTRY_VERIFY(send->statusText().startsWith(QStringLiteral("done")));

  // More ids than the default model has positions: the server refuses, and
  // the panel says so instead of spinning.
  QStringList tooMany;
  for (int i = 0; i < 1100; ++i) tooMany << QStringLiteral("11");
  send->setPromptText(tooMany.join(QLatin1Char(',')));
  send->send();
  QTRY_VERIFY_WITH_TIMEOUT(!window.analysis()->failure().isEmpty(), 20000);
  QVERIFY2(send->statusText().startsWith(QStringLiteral("Analyze failed")),
           qPrintable(send->statusText()));
  QVERIFY(window.promptView()->summaryPanel()->sinksText().contains(QStringLiteral("Failed")));
  QVERIFY(!window.promptView()->summaryPanel()->sinksText().contains(QStringLiteral("analyzing")));
  // The refused request is a red row that says why, not a green empty one.
  QTRY_VERIFY_WITH_TIMEOUT(window.feedModel()->rowCount() > rows + 1, 10000);
  const FeedRow* refused = window.feedModel()->rowAt(0);
  QCOMPARE(refused->state, FeedRow::State::Failed);
  QVERIFY(!window.feedModel()->index(0, FeedModel::Prompt).data().toString().isEmpty());
}

void DashboardScaleTest::thirtyTwoByThirtyTwoGrid() {
  MainWindow window(m_server.address(), fastReconnect());
  window.resize(1600, 1000);
  window.show();
  QTRY_COMPARE_WITH_TIMEOUT(window.subscriptions(), 1, kLong);
  const QString text = QStringLiteral("Llama-sized grids have a thousand and twenty-four heads.");
  PromptClient client(m_server.address());
  QVector<v1::AnalyzeEvent> events;
  v1::AnalyzeRequest request;
  request.set_model("grid-32x32");
  request.set_text(text.toStdString());
  QCOMPARE(client.analyzeRequest(request, &events), QStringLiteral("OK"));
  QTRY_VERIFY_WITH_TIMEOUT(finishedRow(*window.feedModel(), text), 10000);
  selectFeedRow(&window, findRow(*window.feedModel(), text));
  PromptView* view = window.promptView();
  QCOMPARE(view->sinkGridModel()->rowCount(), 32);
  QCOMPARE(view->sinkGridModel()->columnCount(), 32);
  QTRY_VERIFY(!view->sinkGridModel()->isLabelled());  // colour only
  QTableView* grid = view->sinkGridView();
  QTRY_VERIFY(wholeGrid(grid, 32));
  // Head numbers never run into each other: every step-th is named.
  int step = 1;
  while (!view->sinkGridModel()->headerData(step, Qt::Horizontal).isValid()) ++step;
  const QFontMetrics metrics(grid->horizontalHeader()->font());
  QVERIFY2(
      step * grid->columnWidth(0) >= metrics.height(),  // numbers run upwards
      qPrintable(QStringLiteral("step %1, columns %2 px").arg(step).arg(grid->columnWidth(0))));
  const QModelIndex corner = view->sinkGridModel()->index(31, 31);
  QVERIFY(!corner.data().isValid());
  QCOMPARE(corner.data(SinkGridModel::ValueRole).toDouble(),
           clientLayer(events, 31)->sink_score(31));
  // Clicking the last cell opens head L31 H31.
  QTest::mouseClick(grid->viewport(), Qt::LeftButton, {}, grid->visualRect(corner).center());
  QCOMPARE(view->heatmapModel()->layer(), 31);
  QCOMPARE(view->heatmapModel()->head(), 31);
  QTRY_VERIFY_WITH_TIMEOUT(view->heatmapModel()->hasWeights(), 20000);
  const QString path = outputDir() + QStringLiteral("/dashboard-32x32.png");
  QVERIFY2(window.grab().save(path), qPrintable(path));
  qInfo("screenshot: %s", qPrintable(path));
}

}  // namespace attnscope::dashboard

QTEST_MAIN(attnscope::dashboard::DashboardScaleTest)
#include "dashboard_scale_test.moc"
