// End to end: the real attnscope-server process, the real dashboard
// MainWindow in process (offscreen), and a separate gRPC client sending
// prompts, as other users of the service would.
#include <QComboBox>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QSettings>
#include <QSplitter>
#include <QTableView>
#include <QTemporaryDir>
#include <QtTest>

#include "client/ui/connection_indicator.h"
#include "client/ui/entropy_chart.h"
#include "client/ui/feed_panel.h"
#include "client/ui/heatmap_view.h"
#include "client/ui/main_window.h"
#include "client/ui/norm_chart.h"
#include "client/ui/prompt_summary_panel.h"
#include "client/ui/prompt_view.h"
#include "client/ui/settings_dialog.h"
#include "tests/client/prompt_client.h"
#include "tests/client/server_process.h"
#include "tests/client/window_test_support.h"

namespace attnscope::dashboard {
namespace {

namespace v1 = attnscope::v1;
using testing::PromptClient;
using testing::ServerProcess;

const QString kCat = QStringLiteral("The cat sat on the keyboard again.");
const QString kSinks = QStringLiteral("Attention sinks hold the first token of every prompt.");
const QString kStory = QStringLiteral("Once upon a time");
constexpr int kLong = 60000;  // ms: loading a model on a busy 2-core machine

using testing::fastReconnect;

// The newest feed row of `rpc` whose preview is `text`; -1 if none.
int findRow(const FeedModel& feed, const QString& text, const QString& rpc) {
  for (int i = 0; i < feed.rowCount(); ++i) {
    const FeedRow* row = feed.rowAt(i);
    if (row->promptPreview == text && row->rpc == rpc) return i;
  }
  return -1;
}

bool finishedRow(const FeedModel& feed, const QString& text, const QString& rpc) {
  const int row = findRow(feed, text, rpc);
  return row >= 0 && feed.rowAt(row)->state == FeedRow::State::Finished;
}

// Analyzes `text` from the separate client and waits for the dashboard's
// feed to show it finished. The dashboard reports Connected only once the
// server has acknowledged its subscription, so nothing sent after that may be
// missing from the feed.
// Sends `sent` (default: `text`) and waits for the feed row whose preview is
// `text`.
QString analyzeAndWait(PromptClient* client, const MainWindow& window, const QString& text,
                       QVector<v1::AnalyzeEvent>* events, const QString& sent = QString()) {
  const QString status =
      client->analyze(sent.isEmpty() ? text : sent, events, /*withAttention=*/true);
  if (status != QLatin1String("OK")) return status;
  if (!QTest::qWaitFor([&] { return finishedRow(*window.feedModel(), text, "Analyze"); }, 10000)) {
    return QStringLiteral("the feed never showed '%1'").arg(text);
  }
  return status;
}

const v1::LayerStats* clientLayer(const QVector<v1::AnalyzeEvent>& events, int layer) {
  for (const auto& e : events) {
    if (e.has_layer() && e.layer().layer() == layer) return &e.layer();
  }
  return nullptr;
}

}  // namespace

class DashboardEndToEndTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(testing::useTestSettings(m_settingsDir, QStringLiteral("dashboard-e2e")));
  }

  void feedAndPromptView();
  void reconnectResumesFeed();
  void settingsPersist();
  void longPromptFromOtherClientIsAnalyzedInFull();

 private:
  void checkFeedRowsFromOtherClient(const MainWindow& window, const QVector<v1::AnalyzeEvent>& cat);
  void generateFromSendPanel(MainWindow* window);
  void checkPromptView(MainWindow* window, const QVector<v1::AnalyzeEvent>& cat);

  QTemporaryDir m_settingsDir;
};

void DashboardEndToEndTest::feedAndPromptView() {
  ServerProcess server;
  QVERIFY2(server.start(), qPrintable(server.error()));
  MainWindow window(server.address(), fastReconnect());
  window.resize(1600, 1000);
  window.show();
  window.activateWindow();  // shortcuts need the active window
  QVERIFY(QTest::qWaitForWindowActive(&window));
  QTRY_COMPARE_WITH_TIMEOUT(window.connectionState(), Connection::State::Connected, kLong);
  QTRY_COMPARE_WITH_TIMEOUT(window.subscriptions(), 1, 10000);
  QVERIFY(window.connectionIndicator()->text().startsWith(QStringLiteral("Connected")));

  PromptClient client(server.address());
  QVector<v1::AnalyzeEvent> cat;
  QCOMPARE(analyzeAndWait(&client, window, kCat, &cat), QStringLiteral("OK"));
  checkFeedRowsFromOtherClient(window, cat);
  if (QTest::currentTestFailed()) return;
  generateFromSendPanel(&window);
  if (QTest::currentTestFailed()) return;
  checkPromptView(&window, cat);
  if (QTest::currentTestFailed()) return;

  const QString path = QStringLiteral(ATTNSCOPE_TEST_OUTPUT_DIR "/dashboard-screenshot.png");
  QVERIFY2(window.grab().save(path), qPrintable(path));
  qInfo("screenshot: %s", qPrintable(path));
}

void DashboardEndToEndTest::checkFeedRowsFromOtherClient(const MainWindow& window,
                                                         const QVector<v1::AnalyzeEvent>& cat) {
  QVERIFY(!cat.isEmpty() && cat.last().has_summary());
  const v1::Summary& summary = cat.last().summary();
  const FeedModel& feed = *window.feedModel();
  const int row = findRow(feed, kCat, "Analyze");
  QCOMPARE(feed.rowAt(row)->health, summary.health());
  QCOMPARE(feed.rowAt(row)->sinkCount, summary.sinks_size());
  QCOMPARE(feed.rowAt(row)->promptTokens, cat.first().tokens().ids_size());
  QCOMPARE(feed.rowAt(row)->model, QStringLiteral("tiny-gpt2"));
  QCOMPARE(feed.index(row, FeedModel::Health).data().toString(),
           QString::number(summary.health(), 'f', 1));

  PromptClient client(window.serverAddress());
  QVector<v1::AnalyzeEvent> sinks;
  QCOMPARE(client.analyze(kSinks, &sinks), QStringLiteral("OK"));
  QVector<v1::GenerateEvent> story;
  QCOMPARE(client.generate(kStory, 8, &story), QStringLiteral("OK"));
  QTRY_VERIFY_WITH_TIMEOUT(finishedRow(feed, kSinks, "Analyze"), 10000);
  QTRY_VERIFY_WITH_TIMEOUT(finishedRow(feed, kStory, "Generate"), 10000);
  const FeedRow* generated = feed.rowAt(findRow(feed, kStory, "Generate"));
  QVERIFY(story.last().has_summary());
  QCOMPARE(generated->generatedTokens, story.last().summary().generated_tokens());
  QCOMPARE(generated->tokens.size(), generated->generatedTokens);  // per-token entropy events
  QCOMPARE(generated->tokens.first().text, QString::fromStdString(story[1].token().text()));
  // Newest first: the generation, then the second analysis, then the cat.
  QVERIFY(findRow(feed, kStory, "Generate") < findRow(feed, kSinks, "Analyze"));
  QVERIFY(findRow(feed, kSinks, "Analyze") < findRow(feed, kCat, "Analyze"));

  // Ctrl+L focuses the filter; typing filters the table.
  FeedPanel* panel = window.feedPanel();
  QTest::keyClick(window.windowHandle(), Qt::Key_L, Qt::ControlModifier);
  QTRY_VERIFY(panel->filterEdit()->hasFocus());
  QTest::keyClicks(panel->filterEdit(), QStringLiteral("keyboard"));
  QCOMPARE(panel->proxy()->rowCount(), 1);
  QCOMPARE(panel->proxy()->index(0, FeedModel::Prompt).data().toString(), kCat);
  panel->filterEdit()->clear();
  panel->modelCombo()->setCurrentIndex(panel->modelCombo()->findData(QStringLiteral("tiny-gpt2")));
  QCOMPARE(panel->proxy()->rowCount(), feed.rowCount());
  panel->modelCombo()->setCurrentIndex(0);
}

void DashboardEndToEndTest::generateFromSendPanel(MainWindow* window) {
  SendPanel* send = window->sendPanel();
  send->setPromptText(kCat);
  send->setGenerate(true, 8);
  send->promptEdit()->setFocus();
  QTest::keyClick(window->windowHandle(), Qt::Key_Return, Qt::ControlModifier);  // send
  QTRY_VERIFY_WITH_TIMEOUT(finishedRow(*window->feedModel(), kCat, "Generate"), 20000);
  QTRY_VERIFY_WITH_TIMEOUT(window->analysis()->isComplete(), 20000);
  QTRY_VERIFY_WITH_TIMEOUT(!window->entropySeries().linePoints(true).isEmpty(), 10000);
}

void DashboardEndToEndTest::checkPromptView(MainWindow* window,
                                            const QVector<v1::AnalyzeEvent>& cat) {
  // A generation's row carries no analysis: the dashboard analyzes its exact
  // token ids as its own request, then fetches the heads it shows.
  FeedPanel* panel = window->feedPanel();
  const int source = findRow(*window->feedModel(), kCat, "Generate");
  panel->selectRow(panel->proxy()->mapFromSource(window->feedModel()->index(source, 0)).row());
  QTRY_COMPARE(window->analysis()->promptText(), kCat);
  QTRY_VERIFY_WITH_TIMEOUT(window->analysis()->isComplete(), 20000);
  const int tokens = cat.first().tokens().ids_size();
  QCOMPARE(window->analysis()->tokenCount(), tokens);
  QCOMPARE(window->analysis()->errors(), QStringList());

  v1::ListModelsResponse models;
  QCOMPARE(PromptClient(window->serverAddress()).listModels(&models), QStringLiteral("OK"));
  const int layers = models.models(0).num_layers();
  const int heads = models.models(0).num_heads();
  PromptView* view = window->promptView();
  QCOMPARE(view->sinkGridModel()->rowCount(), layers);
  QCOMPARE(view->sinkGridModel()->columnCount(), heads);
  // The sink score is A[l,h,T-1,0]: the dashboard's reassembled heatmaps must
  // agree with the separate client's per-layer numbers, head by head.
  for (int l = 0; l < layers; ++l) {
    for (int h = 0; h < heads; ++h) {
      view->openHead(l, h);  // fetched on demand, one head at a time
      QTRY_VERIFY_WITH_TIMEOUT(view->heatmapModel()->hasWeights(), 20000);
      const double cell =
          view->heatmapModel()->index(tokens - 1, 0).data(HeatmapModel::WeightRole).toDouble();
      QVERIFY2(qAbs(cell - clientLayer(cat, l)->sink_score(h)) < 1e-5,
               qPrintable(QStringLiteral("L%1 H%2").arg(l).arg(h)));
    }
  }
  double rowSum = 0.0;
  for (int j = 0; j < tokens; ++j)
    rowSum += view->heatmapModel()->index(tokens - 2, j).data(HeatmapModel::WeightRole).toDouble();
  QVERIFY(qAbs(rowSum - 1.0) < 1e-4);
  QVERIFY(!view->heatmapModel()->index(0, tokens - 1).data(HeatmapModel::WeightRole).isValid());

  const v1::Summary& summary = cat.last().summary();
  QVERIFY(view->summaryPanel()->healthText().startsWith(QString::number(summary.health(), 'f', 1)));
  QCOMPARE(view->normChart()->barCount(), tokens);
  // The entropy line: the prompt's T points, then the feed's generated tokens.
  QTRY_VERIFY(window->entropySeries().points().last().generated);
  const EntropySeries& entropy = window->entropySeries();
  QCOMPARE(entropy.promptLength(), tokens);
  QCOMPARE(view->entropyChart()->pointCount(0) + view->entropyChart()->pointCount(1) +
               view->entropyChart()->pointCount(2),
           int(entropy.points().size()));

  // Clicking a sink-grid cell opens that head; hovering a row highlights it.
  QTableView* grid = view->sinkGridView();
  const QModelIndex cell = view->sinkGridModel()->index(layers - 1, 1);
  QTest::mouseClick(grid->viewport(), Qt::LeftButton, {}, grid->visualRect(cell).center());
  QCOMPARE(view->heatmapModel()->layer(), layers - 1);
  QCOMPARE(view->heatmapModel()->head(), 1);
  HeatmapView* heatmap = view->heatmapView();
  const QRect target = heatmap->visualRect(view->heatmapModel()->index(tokens - 3, 1));
  QTest::mouseMove(heatmap->viewport(), target.center());
  QTRY_COMPARE(view->heatmapModel()->highlightedRow(), tokens - 3);
}

void DashboardEndToEndTest::longPromptFromOtherClientIsAnalyzedInFull() {
  // The feed shows 80 characters of a prompt but carries the whole analysis:
  // selecting the row shows all of it at once, without a new analysis.
  ServerProcess server;
  QVERIFY2(server.start(), qPrintable(server.error()));
  MainWindow window(server.address(), fastReconnect());
  window.show();
  QTRY_COMPARE_WITH_TIMEOUT(window.subscriptions(), 1, kLong);
  const QString text = kSinks + QStringLiteral(" ") + kCat + QStringLiteral(" ") + kSinks;
  QVERIFY(text.size() > 80);
  PromptClient client(server.address());
  QVector<v1::AnalyzeEvent> events;
  QCOMPARE(analyzeAndWait(&client, window, text.left(80), &events, text), QStringLiteral("OK"));
  const int source = findRow(*window.feedModel(), text.left(80), "Analyze");
  QVERIFY(source >= 0);
  FeedPanel* panel = window.feedPanel();
  panel->selectRow(panel->proxy()->mapFromSource(window.feedModel()->index(source, 0)).row());
  QVERIFY(window.analysis()->isComplete());
  QCOMPARE(window.analysis()->tokenCount(), events.first().tokens().ids_size());
  QCOMPARE(window.analysis()->summary()->health(), events.last().summary().health());
  QCOMPARE(window.analysis()->errors(), QStringList());
  QTRY_VERIFY_WITH_TIMEOUT(window.promptView()->heatmapModel()->hasWeights(), 20000);
  QCOMPARE(window.attentionFetches(), 1);
  QCOMPARE(window.feedModel()->rowCount(), 1);  // the fetch is not a feed row
}

void DashboardEndToEndTest::reconnectResumesFeed() {
  ServerProcess server;
  QVERIFY2(server.start(), qPrintable(server.error()));
  MainWindow window(server.address(), fastReconnect());
  window.show();
  QVERIFY(QTest::qWaitForWindowExposed(&window));
  QTRY_COMPARE_WITH_TIMEOUT(window.connectionState(), Connection::State::Connected, kLong);
  {
    PromptClient client(server.address());
    QVector<v1::AnalyzeEvent> events;
    QCOMPARE(analyzeAndWait(&client, window, QStringLiteral("before the restart"), &events),
             QStringLiteral("OK"));
  }

  const int port = server.port();
  QVERIFY2(server.stop(), "attnscope-server did not exit on SIGTERM");
  QTRY_COMPARE_WITH_TIMEOUT(window.connectionState(), Connection::State::Reconnecting, 10000);
  QVERIFY(window.connectionIndicator()->text().startsWith(QStringLiteral("Reconnecting")));
  QVERIFY2(server.start(port), qPrintable(server.error()));
  QCOMPARE(server.port(), port);
  QTRY_COMPARE_WITH_TIMEOUT(window.connectionState(), Connection::State::Connected, kLong);
  QTRY_COMPARE_WITH_TIMEOUT(window.subscriptions(), 2, 10000);

  PromptClient client(server.address());
  QVector<v1::AnalyzeEvent> events;
  QCOMPARE(analyzeAndWait(&client, window, QStringLiteral("after the restart"), &events),
           QStringLiteral("OK"));
  const FeedModel& feed = *window.feedModel();
  QCOMPARE(findRow(feed, QStringLiteral("after the restart"), "Analyze"), 0);
  QVERIFY(findRow(feed, QStringLiteral("before the restart"), "Analyze") > 0);
  QCOMPARE(feed.rowAt(0)->health, events.last().summary().health());
}

void DashboardEndToEndTest::settingsPersist() {
  QSettings().clear();
  QList<int> sizes;
  {
    MainWindow first(QStringLiteral("127.0.0.1:1"), fastReconnect());
    first.resize(1500, 900);
    first.show();
    first.activateWindow();
    QVERIFY(QTest::qWaitForWindowActive(&first));
    auto* splitter = first.findChild<QSplitter*>(QStringLiteral("mainSplitter"));
    const QList<int> before = splitter->sizes();
    splitter->setSizes({before[0] + 60, before[1] - 60});
    sizes = splitter->sizes();
    QCOMPARE(sizes.first(), before[0] + 60);
    // Ctrl+, opens the settings dialog (modal: keyClick returns once it is
    // closed); a timer polls for it inside the dialog's event loop and
    // answers as soon as it is up. The new address is used and kept.
    QString dialogAddress;
    bool answered = false;
    QTimer poll;
    poll.setInterval(10);
    QObject::connect(&poll, &QTimer::timeout, [&] {
      auto* dialog = qobject_cast<SettingsDialog*>(QApplication::activeModalWidget());
      if (dialog == nullptr) return;
      poll.stop();
      dialogAddress = dialog->serverAddress();
      dialog->setServerAddress(QStringLiteral("127.0.0.1:2"));
      answered = true;
      dialog->accept();
    });
    poll.start();
    QTest::keyClick(first.windowHandle(), Qt::Key_Comma, Qt::ControlModifier);
    QTRY_VERIFY_WITH_TIMEOUT(answered, 10000);
    QCOMPARE(dialogAddress, QStringLiteral("127.0.0.1:1"));
    QTRY_COMPARE(first.serverAddress(), QStringLiteral("127.0.0.1:2"));
    first.close();
  }
  MainWindow second(QString(), fastReconnect());
  second.show();
  QVERIFY(QTest::qWaitForWindowExposed(&second));
  QCOMPARE(second.serverAddress(), QStringLiteral("127.0.0.1:2"));
  QCOMPARE(second.size(), QSize(1500, 900));
  QCOMPARE(second.findChild<QSplitter*>(QStringLiteral("mainSplitter"))->sizes(), sizes);
}

}  // namespace attnscope::dashboard

QTEST_MAIN(attnscope::dashboard::DashboardEndToEndTest)
#include "dashboard_e2e_test.moc"
