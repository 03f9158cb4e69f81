// FeedModel and FeedFilterProxy: the live feed table.
#include "client/models/feed_model.h"

#include <QSignalSpy>
#include <QtTest>

#include "client/models/colors.h"
#include "client/models/feed_filter_proxy.h"
#include "tests/client/event_builders.h"
#include "tests/client/test_registry.h"

namespace attnscope::dashboard {
namespace {

using namespace testing;  // NOLINT: the builders are the vocabulary here

// Applies every event; returns how many were rejected.
int applyAll(FeedModel* model, const FeedEvents& events, QStringList* errors = nullptr) {
  int rejected = 0;
  for (const auto& event : events) {
    QString error;
    if (!model->apply(event, &error)) {
      ++rejected;
      if (errors != nullptr) *errors << error;
    }
  }
  return rejected;
}

QString cell(const FeedModel& model, int row, int column) {
  return model.index(row, column).data().toString();
}

}  // namespace

class FeedModelTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  // Requests that start, finish or fail as the server reports them.
  void lifecycle_data() {
    addSequenceColumns();
    const int running = int(FeedRow::State::Running);
    const int done = int(FeedRow::State::Finished);
    const int failed = int(FeedRow::State::Failed);
    QTest::newRow("started then finished")
        << FeedEvents{started(1), finished(1, 7.5, 2)} << 1 << 0 << ""
        << "7.5" << done;
    QTest::newRow("finished without started (subscribed late)")
        << FeedEvents{finished(9, 3.25)} << 1 << 0 << ""
        << "3.3" << done;
    QTest::newRow("only started") << FeedEvents{started(1)} << 1 << 0 << ""
                                  << "running" << running;
    QTest::newRow("failed request shows its status")
        << FeedEvents{started(1), finished(1, 0.0, 0, "INVALID_ARGUMENT")} << 1 << 0 << ""
        << "INVALID_ARGUMENT" << failed;
    QTest::newRow("generate rows have no health")
        << FeedEvents{started(1, "tiny", "Generate"), finished(1, 0.0, 0, "OK", "tiny", "Generate")}
        << 1 << 0 << ""
        << "" << done;
  }

  void lifecycle() { checkSequence(); }

  // Malformed or out-of-order events: rejected, the table unchanged.
  void rejections_data() {
    addSequenceColumns();
    const int running = int(FeedRow::State::Running);
    const int done = int(FeedRow::State::Finished);
    QTest::newRow("duplicate started")
        << FeedEvents{started(1), started(1)} << 1 << 1 << "duplicate 'started'"
        << "running" << running;
    QTest::newRow("duplicate finished")
        << FeedEvents{started(1), finished(1, 9.0), finished(1, 2.0)} << 1 << 1
        << "duplicate 'finished'"
        << "9.0" << done;
    QTest::newRow("token of an unknown request")
        << FeedEvents{feedToken(4, 0, 0.5)} << 0 << 1 << "unknown request"
        << "" << -1;
    QTest::newRow("token after finished")
        << FeedEvents{started(1), finished(1, 8.0), feedToken(1, 0, 0.5)} << 1 << 1
        << "after the request ended"
        << "8.0" << done;
    QTest::newRow("token index going back")
        << FeedEvents{started(1, "tiny", "Generate"), feedToken(1, 0, 0.5), feedToken(1, 0, 0.5)}
        << 1 << 1 << "token index 0, expected >= 1"
        << "running" << running;
    QTest::newRow("event without payload")
        << FeedEvents{attnscope::v1::FeedEvent()} << 0 << 1 << "no payload"
        << "" << -1;
    QTest::newRow("health above 10")
        << FeedEvents{started(1), finished(1, 11.0)} << 1 << 1 << "health 11 outside 0..10"
        << "running" << running;
    QTest::newRow("NaN health") << FeedEvents{started(1), finished(1, qQNaN())} << 1 << 1
                                << "outside 0..10"
                                << "running" << running;
    QTest::newRow("negative sink count")
        << FeedEvents{started(1), finished(1, 5.0, -2)} << 1 << 1 << "sink_count -2"
        << "running" << running;
  }

  void rejections() { checkSequence(); }

  void healthColour_data() {
    QTest::addColumn<double>("health");
    QTest::addColumn<int>("level");
    QTest::newRow("10 green") << 10.0 << int(HealthLevel::Green);
    QTest::newRow("7 green") << 7.0 << int(HealthLevel::Green);
    QTest::newRow("6.99 amber") << 6.99 << int(HealthLevel::Amber);
    QTest::newRow("4 amber") << 4.0 << int(HealthLevel::Amber);
    QTest::newRow("3.99 red") << 3.99 << int(HealthLevel::Red);
    QTest::newRow("0 red") << 0.0 << int(HealthLevel::Red);
  }

  void healthColour() {
    QFETCH(double, health);
    QFETCH(int, level);
    FeedModel model;
    QVERIFY(model.apply(finished(1, health)));
    const QModelIndex index = model.index(0, FeedModel::Health);
    QCOMPARE(index.data(FeedModel::HealthLevelRole).toInt(), level);
    QCOMPARE(index.data(Qt::BackgroundRole).value<QColor>(), healthTint(HealthLevel(level)));
    QVERIFY(!model.index(0, FeedModel::Prompt).data(Qt::BackgroundRole).isValid());
  }

  void newestFirstAndBounded() {
    FeedModel model;
    model.setMaxRows(3);
    for (quint64 id = 1; id <= 5; ++id) {
      QVERIFY(model.apply(started(id, "tiny", "Analyze", QStringLiteral("prompt %1").arg(id))));
    }
    QCOMPARE(model.rowCount(), 3);
    QCOMPARE(cell(model, 0, FeedModel::Prompt), QStringLiteral("prompt 5"));
    QCOMPARE(cell(model, 2, FeedModel::Prompt), QStringLiteral("prompt 3"));
    QVERIFY(model.apply(finished(4, 6.0)));  // updates the row in place
    QCOMPARE(cell(model, 1, FeedModel::Health), QStringLiteral("6.0"));
    model.setMaxRows(1);
    QCOMPARE(model.rowCount(), 1);
    QCOMPARE(model.rowAt(0)->requestId, quint64(5));
    QVERIFY(model.rowAt(1) == nullptr);
  }

  void display_data() {
    QTest::addColumn<FeedEvents>("events");
    QTest::addColumn<int>("column");
    QTest::addColumn<QString>("text");
    QTest::newRow("generate tokens")
        << FeedEvents{started(1, "tiny", "Generate"), feedToken(1, 0, 0.3), feedToken(1, 1, 0.4),
                      feedToken(1, 2, 0.9)}
        << int(FeedModel::Tokens) << "2 + 3";
    QTest::newRow("analyze tokens") << FeedEvents{started(1)} << int(FeedModel::Tokens) << "2";
    QTest::newRow("duration in ms")
        << FeedEvents{finished(1, 5.0)} << int(FeedModel::Duration) << "250 ms";
    QTest::newRow("max entropy") << FeedEvents{finished(1, 5.0)} << int(FeedModel::MaxEntropy)
                                 << "0.42";
    QTest::newRow("sinks") << FeedEvents{finished(1, 5.0, 3)} << int(FeedModel::Sinks) << "3";
    QTest::newRow("time") << FeedEvents{started(1)} << int(FeedModel::Time)
                          << QDateTime::fromSecsSinceEpoch(1700000001).toString("HH:mm:ss");
    QTest::newRow("newlines in the preview")
        << FeedEvents{started(1, "tiny", "Analyze", "a\nb")} << int(FeedModel::Prompt)
        << QString("a") + QChar(0x23CE) + "b";
  }

  void display() {
    QFETCH(FeedEvents, events);
    QFETCH(int, column);
    QFETCH(QString, text);
    FeedModel model;
    QCOMPARE(applyAll(&model, events), 0);
    QCOMPARE(cell(model, 0, column), text);
  }

  void generatedTokensAreKept() {
    FeedModel model;
    QCOMPARE(applyAll(&model, {started(7, "tiny", "Generate"), feedToken(7, 0, 0.25, " a"),
                               feedToken(7, 1, 0.75, " b")}),
             0);
    const FeedRow* row = model.rowAt(0);
    QCOMPARE(row->tokens.size(), 2);
    QCOMPARE(row->tokens[1].text, QStringLiteral(" b"));
    QCOMPARE(row->tokens[1].entropyNormalized, 0.75);
  }

  void newSessionMarksRunningRowsLost() {
    FeedModel model;
    QCOMPARE(applyAll(&model, {started(1), started(2), finished(2, 9.0)}), 0);
    model.beginSession();
    QCOMPARE(cell(model, 1, FeedModel::Health), QStringLiteral("lost"));
    QCOMPARE(cell(model, 0, FeedModel::Health), QStringLiteral("9.0"));
    // A new server numbers its requests from 1 again: not a duplicate.
    QVERIFY(model.apply(started(1)));
    QCOMPARE(model.rowCount(), 3);
    QVERIFY(model.apply(finished(2, 5.0)));  // request 2 of the new session is new
    QCOMPARE(model.rowCount(), 4);
  }

  // Three replicas number their requests independently: the same id from
  // two replicas is two rows, each event goes to its own replica's row, and a
  // replica's reconnect marks only its own running requests lost.
  void replicasMergeIntoOneFeed() {
    FeedModel model;
    const QString a = QStringLiteral("127.0.0.1:5001"), b = QStringLiteral("127.0.0.1:5002");
    QVERIFY(model.apply(a, started(1, "tiny", "Analyze", "from a")));
    QVERIFY(model.apply(b, started(1, "tiny", "Analyze", "from b")));
    QVERIFY(model.apply(b, started(2, "tiny", "Generate", "b again")));
    QCOMPARE(model.rowCount(), 3);
    QVERIFY(model.apply(a, finished(1, 9.0)));
    QCOMPARE(cell(model, 2, FeedModel::Health), QStringLiteral("9.0"));  // a's row, not b's
    QCOMPARE(cell(model, 1, FeedModel::Health), QStringLiteral("running"));
    QCOMPARE(cell(model, 2, FeedModel::Replica), a);
    QCOMPARE(cell(model, 1, FeedModel::Replica), b);
    QCOMPARE(model.index(1, 0).data(FeedModel::ReplicaRole).toString(), b);
    QVERIFY(model.index(2, FeedModel::Prompt).data(Qt::ToolTipRole).toString().contains(a));
    QString error;
    QVERIFY(!model.apply(a, started(1), &error));  // a duplicate on a
    QVERIFY2(error.contains(QStringLiteral("feed request 1 of 127.0.0.1:5001")), qPrintable(error));
    QCOMPARE(model.replicaNames(), QStringList({a, b}));

    model.beginSession(b);  // b restarted: its ids start again
    QCOMPARE(cell(model, 0, FeedModel::Health), QStringLiteral("lost"));
    QCOMPARE(cell(model, 1, FeedModel::Health), QStringLiteral("lost"));
    QCOMPARE(cell(model, 2, FeedModel::Health), QStringLiteral("9.0"));
    QVERIFY(model.apply(a, started(2)));  // a's numbering goes on
    QVERIFY(model.apply(b, started(1, "tiny", "Analyze", "b restarted")));
    QVERIFY(model.apply(b, finished(1, 4.0)));
    QCOMPARE(cell(model, 0, FeedModel::Replica), b);  // the restarted b's request 1
    QCOMPARE(cell(model, 0, FeedModel::Health), QStringLiteral("4.0"));
    QCOMPARE(cell(model, 1, FeedModel::Health), QStringLiteral("running"));  // a's request 2
    QCOMPARE(model.headerData(FeedModel::Replica, Qt::Horizontal).toString(),
             QStringLiteral("Replica"));
    FeedFilterProxy proxy;  // one replica's rows only
    proxy.setSourceModel(&model);
    proxy.setReplicaFilter(a);
    QCOMPARE(proxy.rowCount(), 2);
    for (int r = 0; r < proxy.rowCount(); ++r) {
      QCOMPARE(proxy.index(r, 0).data(FeedModel::ReplicaRole).toString(), a);
    }
    proxy.setReplicaFilter(QString());
    QCOMPARE(proxy.rowCount(), model.rowCount());
  }

  void droppedCountsAddUpOverReplicas() {
    FeedModel model;
    QSignalSpy spy(&model, &FeedModel::droppedEventsChanged);
    auto event = started(1);
    event.set_dropped(4);
    QVERIFY(model.apply(QStringLiteral("a"), event));
    event = started(1);
    event.set_dropped(3);
    QVERIFY(model.apply(QStringLiteral("b"), event));
    QCOMPARE(model.droppedEvents(), quint64(7));
    model.beginSession(QStringLiteral("a"));  // a restarted: its count starts again
    QCOMPARE(model.droppedEvents(), quint64(3));
    QCOMPARE(spy.count(), 3);
    QCOMPARE(spy.last().first().toULongLong(), quint64(3));
  }

  void droppedCounter() {
    FeedModel model;
    QSignalSpy spy(&model, &FeedModel::droppedEventsChanged);
    auto event = started(1);
    event.set_dropped(4);
    QVERIFY(model.apply(event));
    QCOMPARE(model.droppedEvents(), quint64(4));
    QCOMPARE(spy.count(), 1);
  }

  void modelsSeen() {
    FeedModel model;
    QSignalSpy spy(&model, &FeedModel::modelSeen);
    QCOMPARE(applyAll(&model, {started(1, "a"), started(2, "b"), started(3, "a")}), 0);
    QCOMPARE(model.modelNames(), QStringList({"a", "b"}));
    QCOMPARE(spy.count(), 2);
  }

  void filter_data() {
    QTest::addColumn<QString>("model");
    QTest::addColumn<QString>("text");
    QTest::addColumn<QStringList>("previews");  // shown, top to bottom
    QTest::newRow("everything") << ""
                                << "" << QStringList{"dog runs", "Cat naps", "the cat"};
    QTest::newRow("model a") << "a"
                             << "" << QStringList{"dog runs", "the cat"};
    QTest::newRow("model b") << "b"
                             << "" << QStringList{"Cat naps"};
    QTest::newRow("text, any case") << ""
                                    << "CAT" << QStringList{"Cat naps", "the cat"};
    QTest::newRow("model and text") << "a"
                                    << "cat" << QStringList{"the cat"};
    QTest::newRow("unknown model") << "c"
                                   << "" << QStringList{};
  }

  void filter() {
    QFETCH(QString, model);
    QFETCH(QString, text);
    QFETCH(QStringList, previews);
    FeedModel feed;
    QCOMPARE(applyAll(&feed, {started(1, "a", "Analyze", "the cat"),
                              started(2, "b", "Analyze", "Cat naps"),
                              started(3, "a", "Analyze", "dog runs")}),
             0);
    FeedFilterProxy proxy;
    proxy.setSourceModel(&feed);
    proxy.setModelFilter(model);
    proxy.setTextFilter(text);
    QStringList shown;
    for (int r = 0; r < proxy.rowCount(); ++r) {
      shown << proxy.index(r, FeedModel::Prompt).data().toString();
    }
    QCOMPARE(shown, previews);
  }

 private:
  void addSequenceColumns() {
    QTest::addColumn<FeedEvents>("events");
    QTest::addColumn<int>("rows");
    QTest::addColumn<int>("rejected");
    QTest::addColumn<QString>("errorPart");   // in the first rejection's message
    QTest::addColumn<QString>("healthText");  // row 0, Health column
    QTest::addColumn<int>("state");           // row 0
  }

  void checkSequence() {
    QFETCH(FeedEvents, events);
    QFETCH(int, rows);
    QFETCH(int, rejected);
    QFETCH(QString, errorPart);
    QFETCH(QString, healthText);
    QFETCH(int, state);

    FeedModel model;
    QStringList errors;
    QCOMPARE(applyAll(&model, events, &errors), rejected);
    QCOMPARE(model.rowCount(), rows);
    if (!errorPart.isEmpty())
      QVERIFY2(errors.first().contains(errorPart), qPrintable(errors.first()));
    if (rows > 0) {
      QCOMPARE(cell(model, 0, FeedModel::Health), healthText);
      QCOMPARE(model.index(0, 0).data(FeedModel::RowStateRole).toInt(), state);
    }
  }
};

ATTNSCOPE_REGISTER_TEST(FeedModelTest)

}  // namespace attnscope::dashboard

#include "feed_model_test.moc"
