// FeedRows without an item model: what each event does to the rows, and the
// order in which a listener hears of it (a view must hear of a removal or an
// insertion before it happens, and of nothing when an event is refused).
#include "client/models/feed_rows.h"

#include <QtTest>

#include "tests/client/event_builders.h"
#include "tests/client/test_registry.h"

namespace attnscope::dashboard {
namespace {

using namespace testing;  // NOLINT: the builders are the vocabulary here
namespace v1 = attnscope::v1;

// Writes down every notification, with the row count at the time.
class Recorder : public FeedRowsListener {
 public:
  const FeedRows* rows = nullptr;
  QStringList log;

  void aboutToRemoveRows(int first, int last) override {
    log << QStringLiteral("remove %1-%2 of %3").arg(first).arg(last).arg(rows->size());
  }
  void rowsRemoved() override { log << QStringLiteral("removed, %1 left").arg(rows->size()); }
  void aboutToInsertFirstRow() override {
    log << QStringLiteral("insert at 0 of %1").arg(rows->size());
  }
  void firstRowInserted() override { log << QStringLiteral("inserted, %1").arg(rows->size()); }
  void rowChanged(int row) override { log << QStringLiteral("changed %1").arg(row); }
  void newModel(const QString& model) override { log << QStringLiteral("model ") + model; }
  void droppedChanged(quint64 dropped) override { log << QStringLiteral("dropped %1").arg(dropped); }
  void requestEnded(int row) override { log << QStringLiteral("ended %1").arg(row); }
};

}  // namespace

class FeedRowsTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void eventsBecomeRowsAndTheListenerHearsEachChangeInOrder() {
    Recorder recorder;
    FeedRows rows(&recorder);
    recorder.rows = &rows;
    QVERIFY(rows.apply(QString(), started(1)));
    QVERIFY(rows.apply(QString(), started(2, "other", "Generate")));
    QVERIFY(rows.apply(QString(), feedToken(2, 0, 0.5)));
    QVERIFY(rows.apply(QString(), finished(1, 7.5, 2)));
    QCOMPARE(recorder.log, (QStringList{"model tiny", "insert at 0 of 0", "inserted, 1",
                                        "model other", "insert at 0 of 1", "inserted, 2",
                                        "changed 0", "changed 1", "ended 1"}));
    QCOMPARE(rows.size(), 2);
    QCOMPARE(rows.rowAt(0)->requestId, quint64(2));
    QCOMPARE(rows.rowAt(0)->tokens.size(), 1);
    QCOMPARE(rows.rowAt(0)->state, FeedRow::State::Running);
    QCOMPARE(rows.rowAt(1)->state, FeedRow::State::Finished);
    QCOMPARE(rows.rowAt(1)->health, 7.5);
    QCOMPARE(rows.rowAt(1)->sinkCount, 2);
    QCOMPARE(rows.modelNames(), (QStringList{"tiny", "other"}));
    QVERIFY(rows.rowAt(2) == nullptr);
  }

  void refusedEventsChangeNothingAndTellNothing() {
    Recorder recorder;
    FeedRows rows(&recorder);
    recorder.rows = &rows;
    QVERIFY(rows.apply(QString(), started(1)));
    recorder.log.clear();
    QString error;
    QVERIFY(!rows.apply(QString(), started(1), &error));
    QVERIFY2(error.contains(QStringLiteral("duplicate 'started'")), qPrintable(error));
    QVERIFY(!rows.apply(QString(), feedToken(9, 0, 0.5), &error));
    QVERIFY2(error.contains(QStringLiteral("unknown request")), qPrintable(error));
    QVERIFY(!rows.apply(QString(), finished(1, 11.0), &error));
    QVERIFY2(error.contains(QStringLiteral("health 11 outside 0..10")), qPrintable(error));
    QVERIFY(!rows.apply(QString(), v1::FeedEvent(), &error));
    QVERIFY2(error.contains(QStringLiteral("no payload")), qPrintable(error));
    QVERIFY(rows.apply(QString(), finished(1, 5.0)));
    QVERIFY(!rows.apply(QString(), finished(1, 5.0), &error));
    QVERIFY2(error.contains(QStringLiteral("duplicate 'finished'")), qPrintable(error));
    QCOMPARE(recorder.log, (QStringList{"changed 0", "ended 0"}));  // the one accepted finish
    QCOMPARE(rows.size(), 1);
  }

  void theOldestRowsFallOffBeforeTheNewestGoesIn() {
    Recorder recorder;
    FeedRows rows(&recorder);
    recorder.rows = &rows;
    for (quint64 id = 1; id <= 3; ++id) QVERIFY(rows.apply(QString(), started(id)));
    recorder.log.clear();
    rows.setMaxRows(2);
    QCOMPARE(recorder.log, (QStringList{"remove 2-2 of 3", "removed, 2 left"}));
    recorder.log.clear();
    QVERIFY(rows.apply(QString(), started(4)));
    QCOMPARE(recorder.log,
             (QStringList{"remove 1-1 of 2", "removed, 1 left", "insert at 0 of 1", "inserted, 2"}));
    QCOMPARE(rows.rowAt(0)->requestId, quint64(4));
    QCOMPARE(rows.rowAt(1)->requestId, quint64(3));
  }

  void aNewSessionLosesOnlyThatReplicasRunningRequests() {
    Recorder recorder;
    FeedRows rows(&recorder);
    recorder.rows = &rows;
    v1::FeedEvent dropped = started(1);
    dropped.set_dropped(3);
    QVERIFY(rows.apply(QStringLiteral("a:1"), dropped));
    QVERIFY(rows.apply(QStringLiteral("b:1"), started(1)));
    QCOMPARE(rows.droppedEvents(), quint64(3));
    recorder.log.clear();
    rows.beginSession(QStringLiteral("a:1"));
    QCOMPARE(recorder.log, (QStringList{"dropped 0", "changed 1"}));
    QCOMPARE(rows.rowAt(1)->state, FeedRow::State::Lost);    // a's request
    QCOMPARE(rows.rowAt(0)->state, FeedRow::State::Running);  // b's
    QCOMPARE(rows.replicaNames(), (QStringList{"a:1", "b:1"}));
    // Request ids restart with the new server: id 1 of a is a new request.
    QVERIFY(rows.apply(QStringLiteral("a:1"), started(1)));
    QCOMPARE(rows.size(), 3);
  }

  void theDashboardsOwnRequestsAddNoRow() {
    Recorder recorder;
    FeedRows rows(&recorder);
    recorder.rows = &rows;
    v1::FeedEvent own = started(1);
    own.mutable_started()->set_origin(v1::REQUEST_ORIGIN_DASHBOARD);
    v1::FeedEvent ownFinish = finished(1, 5.0);
    ownFinish.mutable_finished()->set_origin(v1::REQUEST_ORIGIN_DASHBOARD);
    QVERIFY(rows.apply(QString(), own));
    QVERIFY(rows.apply(QString(), ownFinish));
    QCOMPARE(rows.size(), 0);
    QCOMPARE(rows.dashboardRequests(), quint64(1));
    QVERIFY(recorder.log.isEmpty());
  }
};

ATTNSCOPE_REGISTER_TEST(FeedRowsTest)

}  // namespace attnscope::dashboard

#include "feed_rows_test.moc"
