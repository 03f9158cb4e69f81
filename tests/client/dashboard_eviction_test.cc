// The dashboard's eviction view on a real run: attnscope-server serves
// llama-stories260K, an EvaluateEviction call streams its events into an
// EvictionRun (the live path), the Subscribe feed's finished event rebuilds
// the same run (the path of a run picked from the feed), and the view draws
// both; the screenshot goes to <build dir>/test-output/dashboard-eviction.png.
#include <grpcpp/grpcpp.h>

#include <QDir>
#include <QtTest>
#include <chrono>
#include <cmath>
#include <thread>

#include "attnscope/v1/attnscope.grpc.pb.h"
#include "client/models/eviction_run.h"
#include "client/ui/eviction_view.h"
#include "tests/client/server_process.h"

namespace attnscope::dashboard {

namespace v1 = attnscope::v1;

class DashboardEvictionTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void initTestCase() {
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
    const int n = 200;
    request.mutable_ids()->add_ids(1);
    for (int i = 1; i < n; ++i) request.mutable_ids()->add_ids((i * 37 + 11) % 512);
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
    int expected = 0;
    for (int t = 0; t < n - 1; ++t) expected += std::min(t + 1, 32);
    QCOMPARE(view.keptView()->litCells(), expected);
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

 private:
  testing::ServerProcess m_server;
};

}  // namespace attnscope::dashboard

QTEST_MAIN(attnscope::dashboard::DashboardEvictionTest)
#include "dashboard_eviction_test.moc"
