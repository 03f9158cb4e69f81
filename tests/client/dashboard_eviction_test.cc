// The dashboard's eviction view on a real run: attnscope-server serves
// llama-stories260K, an EvaluateEviction call streams its events into an
// EvictionRun (the live path), the Subscribe feed's finished event rebuilds
// the same run (the path of a run picked from the feed), and the view draws
// both; the screenshot goes to <build dir>/test-output/dashboard-eviction.png.
// Then the same through the real MainWindow: a run sent from the send panel
// is drawn live in the eviction tab, picking its finished feed row draws the
// same run, an Analyze row switches back to the prompt tab, and a bad policy
// is refused by the server in the send panel's status line; the whole
// window's screenshot goes to dashboard-main-eviction.png.
#include <grpcpp/grpcpp.h>

#include <QComboBox>
#include <QChartView>
#include <QLegend>
#include <QLegendMarker>
#include <QDir>
#include <QFile>
#include <QRegularExpression>
#include <QLabel>
#include <QSettings>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QtTest>
#include <chrono>
#include <cmath>
#include <thread>

#include "attnscope/v1/attnscope.grpc.pb.h"
#include "client/models/eviction_run.h"
#include "client/ui/eviction_view.h"
#include "client/ui/feed_panel.h"
#include "client/ui/main_window.h"
#include "client/ui/prompt_view.h"
#include "client/ui/send_panel.h"
#include "tests/client/server_process.h"
#include "tests/client/window_test_support.h"

namespace attnscope::dashboard {

namespace v1 = attnscope::v1;

namespace {

constexpr int kTokens = 200;  // the text: N tokens, N - 1 steps per policy

// The ids both tests read: the first N of tests/data/stories260K-sampled-1024.ids
// (a story the model sampled itself, so the perplexities are the model's own).
QVector<qint64> textIds() {
  QFile file(QStringLiteral(ATTNSCOPE_TEST_DATA_DIR "/stories260K-sampled-1024.ids"));
  QVector<qint64> ids;
  if (!file.open(QIODevice::ReadOnly)) return ids;
  const QStringList words =
      QString::fromUtf8(file.readAll()).split(QRegularExpression(QStringLiteral("[\\s,]+")),
                                              Qt::SkipEmptyParts);
  for (const QString& word : words) {
    if (ids.size() == kTokens) break;
    ids << word.toLongLong();
  }
  return ids;
}

QString idsText(const QVector<qint64>& ids) {
  QStringList parts;
  for (const qint64 id : ids) parts << QString::number(id);
  return parts.join(QStringLiteral(", "));
}

// Kept cells of sinks:4+28 (or window:32) over N - 1 steps.
int sinkCells(int capacity) {
  int cells = 0;
  for (int t = 0; t < kTokens - 1; ++t) cells += std::min(t + 1, capacity);
  return cells;
}

// The proxy row of the newest feed row of `rpc`, or -1.
int feedRowOf(FeedPanel* panel, const QString& rpc) {
  for (int r = 0; r < panel->proxy()->rowCount(); ++r) {
    if (panel->proxy()->index(r, FeedModel::Rpc).data().toString() == rpc) return r;
  }
  return -1;
}

}  // namespace

class DashboardEvictionTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(testing::useTestSettings(m_settingsDir, QStringLiteral("dashboard-eviction")));
    const QString stories = QStringLiteral(ATTNSCOPE_TEST_DATA_DIR "/models/llama-stories260K");
    QVERIFY2(m_server.start(0, 90000, {QStringLiteral("--model"), QStringLiteral("stories=") + stories}),
             qPrintable(m_server.error()));
  }

  void liveRunAndFeedRunDrawTheSame() {
    auto stub = v1::Analyzer::NewStub(grpc::CreateChannel(m_server.address().toStdString(),
                                                          grpc::InsecureChannelCredentials()));
    grpc::ClientContext feedContext;
    feedContext.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(300));
    auto feed = stub->Subscribe(&feedContext, v1::SubscribeRequest());
    feed->WaitForInitialMetadata();

    v1::EvaluateEvictionRequest request;
    request.set_model("stories");
    const int n = kTokens;
    const QVector<qint64> ids = textIds();
    QCOMPARE(ids.size(), n);
    for (const qint64 id : ids) request.mutable_ids()->add_ids(id);
    for (const char* p : {"full", "window:32", "sinks:4+28", "detected:4+28"}) request.add_policies(p);
    request.set_include_kept_positions(true);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(300));
    auto reader = stub->EvaluateEviction(&context, request);
    EvictionRun live;
    v1::EvaluateEvictionEvent event;
    while (reader->Read(&event)) live.addEvent(event);
    const grpc::Status status = reader->Finish();
    QVERIFY2(status.ok(), status.error_message().c_str());

    v1::FeedEvent feedEvent;
    bool finished = false;
    while (feed->Read(&feedEvent)) {
      if (feedEvent.has_finished() && feedEvent.finished().rpc() == "EvaluateEviction") {
        finished = true;
        break;
      }
    }
    feedContext.TryCancel();
    QVERIFY(finished);
    const EvictionRun picked = EvictionRun::fromFinished(feedEvent.finished());

    QCOMPARE(live.policies().size(), 4);
    QCOMPARE(picked.policies().size(), 4);
    QCOMPARE(live.textTokens(), n);
    for (int i = 0; i < 4; ++i) {
      const EvictionRun::Policy& a = live.policies()[i];
      const EvictionRun::Policy& b = picked.policies()[i];
      QCOMPARE(a.name, b.name);
      QCOMPARE(a.curve.size(), n - 1);
      QCOMPARE(b.curve.size(), n - 1);
      for (int t = 0; t < n - 1; ++t) {
        const double d = std::fabs(a.curve[t].y() - b.curve[t].y());
        QVERIFY2(d <= 1e-9 * a.curve[t].y(), qPrintable(a.name));
      }
      // The sink policies' kept positions from the live events equal what
      // their definition gives for the feed's run.
      QCOMPARE(a.kept.size(), EvictionRun::isSinkPolicy(a.name) ? n - 1 : 0);
      QCOMPARE(a.kept, b.kept);
    }
    const EvictionRun::Policy& sinks = live.policies()[2];
    QCOMPARE(sinks.kept[150].size(), 32);
    QCOMPARE(sinks.kept[150].first(), qint64(0));
    QCOMPARE(sinks.kept[150][4], qint64(150 - 27));

    EvictionView view;
    view.resize(900, 700);
    view.setRun(live);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    for (int i = 0; i < 4; ++i) QCOMPARE(view.curvePoints(i), n - 1);
    // full (the first sink-like policy) is picked first: every token of
    // every step, 1 + 2 + ... + (n - 1).
    QCOMPARE(view.keptView()->litCells(), (n - 1) * n / 2);
    auto* box = view.findChild<QComboBox*>(QStringLiteral("evictionPolicyBox"));
    QVERIFY(box != nullptr);
    QCOMPARE(box->count(), 3);  // full, window, sinks (detected is not drawn)
    box->setCurrentIndex(2);
    QCOMPARE(view.keptView()->litCells(), sinkCells(32));
    const QString dir = QStringLiteral(ATTNSCOPE_TEST_OUTPUT_DIR);
    QDir().mkpath(dir);
    const QImage shot = view.grab().toImage();
    QVERIFY(shot.save(dir + QStringLiteral("/dashboard-eviction.png")));
    // The picture is not blank: the kept-positions view holds the policy colour.
    const QImage kept = view.keptView()->grab().toImage();
    int blue = 0;
    for (int y = 0; y < kept.height(); ++y) {
      for (int x = 0; x < kept.width(); ++x) blue += kept.pixelColor(x, y) == QColor(0x1d, 0x4f, 0x91);
    }
    QVERIFY2(blue > 500, qPrintable(QString::number(blue)));
  }

  void mainWindowSendsAndPicksEvictionRuns();

 private:
  QTemporaryDir m_settingsDir;
  testing::ServerProcess m_server;
};

void DashboardEvictionTest::mainWindowSendsAndPicksEvictionRuns() {
  ConnectionOptions options;
  options.initialBackoffMs = 100;
  options.maxBackoffMs = 1000;
  options.probeTimeoutMs = 2000;
  MainWindow window(m_server.address(), options);  // its default size
  window.show();
  QVERIFY(QTest::qWaitForWindowExposed(&window));
  QTRY_COMPARE_WITH_TIMEOUT(window.connectionState(), Connection::State::Connected, 90000);
  FeedPanel* feed = window.feedPanel();
  feed->setFollowing(false);  // rows are picked by hand below
  SendPanel* send = window.sendPanel();
  QTabWidget* tabs = window.detailTabs();
  EvictionView* view = window.evictionView();
  const QVector<qint64> ids = textIds();
  QCOMPARE(ids.size(), kTokens);

  // An Analyze first, to have a prompt row to switch back to.
  send->setTokenIds(true);
  send->setPromptText(idsText(ids.mid(0, 24)));
  send->send();
  QTRY_VERIFY_WITH_TIMEOUT(send->statusText().startsWith(QLatin1String("done")), 60000);
  QCOMPARE(tabs->currentWidget(), static_cast<QWidget*>(window.promptView()));

  // Evaluate eviction from the send panel: drawn live in the eviction tab.
  send->setPromptText(idsText(ids));
  send->setEvaluateEviction(true);
  QVERIFY(send->isEvaluateEviction());
  send->setEvictionPolicies(QStringLiteral("full window:32, sinks:4+28 detected:4+28"));
  send->send();
  QCOMPARE(tabs->currentWidget(), static_cast<QWidget*>(view));
  int partial = 0;  // redraws seen before the run ended (timing-dependent)
  const bool done = QTest::qWaitFor(
      [&] {
        const int points = view->curvePoints(0);
        if (points > 0 && points < kTokens - 1) ++partial;
        return send->statusText().startsWith(QLatin1String("done")) ||
               send->statusText().contains(QLatin1String("failed"));
      },
      240000);
  QVERIFY2(done, qPrintable(send->statusText()));
  QVERIFY2(send->statusText().startsWith(QLatin1String("done: full ")),
           qPrintable(send->statusText()));
  qInfo("live redraws seen mid-run: %d", partial);
  const EvictionRun live = window.evictionRun();
  QCOMPARE(live.policies().size(), 4);
  QCOMPARE(live.textTokens(), kTokens);
  for (int i = 0; i < 4; ++i) {
    QCOMPARE(view->curvePoints(i), kTokens - 1);
    QVERIFY(live.policies()[i].done);
  }
  QCOMPARE(view->keptView()->litCells(), (kTokens - 1) * kTokens / 2);  // full first
  auto* box = view->findChild<QComboBox*>(QStringLiteral("evictionPolicyBox"));
  QVERIFY(box != nullptr);
  QCOMPARE(box->count(), 3);
  box->setCurrentIndex(2);  // sinks:4+28
  QCOMPARE(view->keptView()->litCells(), sinkCells(32));

  // Its feed row: the RPC, the policies and their perplexities.
  QTRY_VERIFY_WITH_TIMEOUT(feedRowOf(feed, QStringLiteral("EvaluateEviction")) >= 0 &&
                               feed->proxy()
                                       ->index(feedRowOf(feed, QStringLiteral("EvaluateEviction")),
                                               FeedModel::Rpc)
                                       .data(FeedModel::RowStateRole)
                                       .toInt() == int(FeedRow::State::Finished),
                           30000);
  const int evictionRow = feedRowOf(feed, QStringLiteral("EvaluateEviction"));
  const QString prompt =
      feed->proxy()->index(evictionRow, FeedModel::Prompt).data().toString();
  QVERIFY2(prompt.startsWith(QStringLiteral("[full ")), qPrintable(prompt));
  for (const EvictionRun::Policy& p : live.policies()) {
    const QString entry = QStringLiteral("%1 %2").arg(p.name).arg(p.perplexity, 0, 'f', 2);
    QVERIFY2(prompt.contains(entry), qPrintable(prompt + QStringLiteral(" lacks ") + entry));
  }
  QVERIFY(feed->proxy()
              ->index(evictionRow, FeedModel::Prompt)
              .data(Qt::ToolTipRole)
              .toString()
              .contains(QStringLiteral("perplexity: full ")));
  QVERIFY(feed->proxy()->index(evictionRow, FeedModel::MaxEntropy).data().toString().isEmpty());

  // An Analyze row shows the prompt tab; the eviction row draws the same run.
  const int analyzeRow = feedRowOf(feed, QStringLiteral("Analyze"));
  QVERIFY(analyzeRow >= 0);
  feed->selectRow(analyzeRow);
  QCOMPARE(tabs->currentWidget(), static_cast<QWidget*>(window.promptView()));
  feed->selectRow(evictionRow);
  QCOMPARE(tabs->currentWidget(), static_cast<QWidget*>(view));
  const EvictionRun& picked = window.evictionRun();
  QCOMPARE(picked.policies().size(), 4);
  QCOMPARE(picked.textTokens(), kTokens);
  for (int i = 0; i < 4; ++i) {
    const EvictionRun::Policy& a = live.policies()[i];
    const EvictionRun::Policy& b = picked.policies()[i];
    QCOMPARE(b.name, a.name);
    QCOMPARE(b.curve.size(), kTokens - 1);
    QCOMPARE(view->curvePoints(i), kTokens - 1);
    for (int t = 0; t < kTokens - 1; ++t) {
      const double d = std::fabs(a.curve[t].y() - b.curve[t].y());
      QVERIFY2(d <= 1e-9 * a.curve[t].y(), qPrintable(a.name));
    }
    QCOMPARE(b.kept, a.kept);
    const double dp = std::fabs(a.perplexity - b.perplexity);
    QVERIFY2(dp <= 1e-9 * a.perplexity, qPrintable(a.name));
  }
  QCOMPARE(box->currentText(), QStringLiteral("kept positions: sinks:4+28"));  // kept by name
  QCOMPARE(view->keptView()->litCells(), sinkCells(32));
  QVERIFY2(view->note().startsWith(QStringLiteral("EvaluateEviction #")), qPrintable(view->note()));

  // The chart's legend names every policy (its markers survive the live
  // redraws).
  auto* chartView = view->findChild<QChartView*>();
  QVERIFY(chartView != nullptr);
  const QList<QLegendMarker*> markers = chartView->chart()->legend()->markers();
  QCOMPARE(markers.size(), 4);
  for (int i = 0; i < 4; ++i) {
    QCOMPARE(markers[i]->label(), live.policies()[i].name);
    QVERIFY2(markers[i]->isVisible(), qPrintable(markers[i]->label()));
  }
  QCOMPARE(chartView->chart()->axes().size(), 2);

  const QString dir = QStringLiteral(ATTNSCOPE_TEST_OUTPUT_DIR);
  QDir().mkpath(dir);
  QVERIFY(window.grab().toImage().save(dir + QStringLiteral("/dashboard-main-eviction.png")));

  // Bad policies: the server's INVALID_ARGUMENT in the status line, in red.
  for (const char* bad : {"bogus", "sinks:0+0"}) {
    send->setEvictionPolicies(QStringLiteral("full ") + QString::fromLatin1(bad));
    send->send();
    QTRY_VERIFY_WITH_TIMEOUT(send->statusText().contains(QLatin1String("failed")), 60000);
    const QString status = send->statusText();
    QVERIFY2(status.startsWith(QStringLiteral("EvaluateEviction failed: INVALID_ARGUMENT")),
             qPrintable(status));
    QVERIFY2(status.contains(QStringLiteral("\"%1\"").arg(QString::fromLatin1(bad))),
             qPrintable(status));
    QVERIFY(send->statusLabel()->styleSheet().contains(QStringLiteral("#c62828")));
    QVERIFY(view->note().startsWith(QStringLiteral("EvaluateEviction failed")));
  }
  // No policy at all: refused by the panel, nothing sent.
  send->setEvictionPolicies(QStringLiteral(" , "));
  send->send();
  QVERIFY2(send->statusText().startsWith(QStringLiteral("eviction: give at least one policy")),
           qPrintable(send->statusText()));

  // The window still works: a short run, then an Analyze.
  send->setPromptText(idsText(ids.mid(0, 40)));
  send->setEvictionPolicies(QStringLiteral("sinks:2+6"));
  send->setEvictionPositions(QStringLiteral("original"));
  send->send();
  QTRY_VERIFY_WITH_TIMEOUT(send->statusText().startsWith(QLatin1String("done: sinks:2+6 ")),
                           60000);
  QCOMPARE(window.evictionRun().policies().size(), 1);
  QCOMPARE(view->curvePoints(0), 39);
  QCOMPARE(view->keptView()->litCells(), [] {
    int cells = 0;
    for (int t = 0; t < 39; ++t) cells += std::min(t + 1, 8);
    return cells;
  }());
  send->setEvaluateEviction(false);
  send->send();
  QTRY_VERIFY_WITH_TIMEOUT(send->statusText().startsWith(QLatin1String("done")) &&
                               send->statusText().contains(QLatin1String("health")),
                           60000);
  QCOMPARE(tabs->currentWidget(), static_cast<QWidget*>(window.promptView()));
  QCOMPARE(window.analysis()->tokenCount(), 40);
}

}  // namespace attnscope::dashboard

QTEST_MAIN(attnscope::dashboard::DashboardEvictionTest)
#include "dashboard_eviction_test.moc"
