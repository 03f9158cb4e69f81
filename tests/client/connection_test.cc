// ReconnectBackoff and Connection without a server: the delays, the states
// and the failures the GUI sees when nobody answers.
#include "client/connection/connection.h"

#include <QTcpServer>
#include <atomic>
#include <memory>
#include <QThread>
#include <QtTest>

#include "client/connection/reconnect_backoff.h"
#include "tests/client/test_registry.h"

namespace attnscope::dashboard {
namespace {

// A loopback port with nothing listening on it (bound, then released).
int closedPort() {
  QTcpServer probe;
  if (!probe.listen(QHostAddress::LocalHost, 0)) return 1;
  const int port = probe.serverPort();
  probe.close();
  return port;
}

// A Connection on its own worker thread, as the main window runs it, with
// its signals collected on the test's thread.
class ConnectionFixture : public QObject {
 public:
  explicit ConnectionFixture(ConnectionOptions options) : m_connection(new Connection(options)) {
    m_connection->moveToThread(&m_thread);
    connect(&m_thread, &QThread::finished, m_connection, &QObject::deleteLater);
    m_thread.start();
    connect(m_connection, &Connection::stateChanged, this,
            [this](Connection::State state, const QString& detail) {
              states << state;
              details << detail;
            });
    connect(m_connection, &Connection::reconnectScheduled, this,
            [this](int delayMs, int, const QString& replica) {
              delays << delayMs;
              delayReplicas << replica;
            });
    connect(m_connection, &Connection::idle, this, [this] { ++idles; });
    connect(m_connection, &Connection::replicasResolved, this,
            [this](const QStringList& labels) { replicas = labels; });
    connect(m_connection, &Connection::replicaStateChanged, this,
            [this](const QString& replica, Connection::State state, const QString&) {
              replicaStates[replica] = state;
            });
    const auto onFinished = [this](quint64 tag, bool ok, const QString& error) {
      finished << tag;
      okays << ok;
      errors << error;
    };
    connect(m_connection, &Connection::analyzeFinished, this, onFinished);
    connect(m_connection, &Connection::evictionFinished, this, onFinished);
  }
  ~ConnectionFixture() override {
    Connection* c = m_connection;
    QMetaObject::invokeMethod(
        c, [c] { c->shutdown(); }, Qt::BlockingQueuedConnection);
    m_thread.quit();
    m_thread.wait();
  }

  // Feed attempts the connection has started (its thread-safe counter).
  int attempts() const { return m_connection->attemptsStarted(); }
  // Returns once the connection's thread has run everything queued before.
  void sync() {
    QMetaObject::invokeMethod(
        m_connection, [] {}, Qt::BlockingQueuedConnection);
    QCoreApplication::processEvents();  // and the signals it queued for us
  }

  template <typename F>
  void post(F call) {
    Connection* c = m_connection;
    QMetaObject::invokeMethod(
        c, [c, call] { call(c); }, Qt::QueuedConnection);
  }

  QList<Connection::State> states;
  QStringList details;
  QList<int> delays;
  QStringList delayReplicas;
  int idles = 0;
  QStringList replicas;
  QMap<QString, Connection::State> replicaStates;
  QList<quint64> finished;
  QList<bool> okays;
  QStringList errors;

 private:
  QThread m_thread;
  Connection* m_connection;
};

}  // namespace

class ConnectionTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void backoff_data() {
    QTest::addColumn<int>("initialMs");
    QTest::addColumn<int>("maxMs");
    QTest::addColumn<QList<int>>("delays");
    QTest::newRow("doubles to the cap")
        << 100 << 1000 << QList<int>{100, 200, 400, 800, 1000, 1000};
    QTest::newRow("cap below the second step") << 250 << 300 << QList<int>{250, 300, 300};
    QTest::newRow("zero initial is raised to 1 ms") << 0 << 4 << QList<int>{1, 2, 4, 4};
    QTest::newRow("cap below initial is raised") << 500 << 10 << QList<int>{500, 500};
  }

  void backoff() {
    QFETCH(int, initialMs);
    QFETCH(int, maxMs);
    QFETCH(QList<int>, delays);
    ReconnectBackoff backoff(initialMs, maxMs);
    QList<int> actual;
    for (int i = 0; i < delays.size(); ++i) actual << backoff.nextDelayMs();
    QCOMPARE(actual, delays);
    QCOMPARE(backoff.attempts(), int(delays.size()));
    backoff.reset();
    QCOMPARE(backoff.nextDelayMs(), delays.first());
  }

  void backoffNeverOverflows() {
    ReconnectBackoff backoff(1, 1 << 30);
    int last = 0;
    for (int i = 0; i < 100; ++i) last = backoff.nextDelayMs();
    QCOMPARE(last, 1 << 30);
  }

  // Nobody listens: the connection keeps trying, backing off, and stays in
  // Connecting (it has never been connected), never Connected.
  void retriesWithBackoffWhenNobodyAnswers() {
    ConnectionOptions options;
    options.initialBackoffMs = 50;
    options.maxBackoffMs = 200;
    options.probeTimeoutMs = 300;
    ConnectionFixture fixture(options);
    const QString address = QStringLiteral("127.0.0.1:%1").arg(closedPort());
    fixture.post([address](Connection* c) { c->connectTo(address); });
    QTRY_VERIFY_WITH_TIMEOUT(fixture.delays.size() >= 4, 15000);
    QCOMPARE(fixture.delays.mid(0, 4), QList<int>({50, 100, 200, 200}));
    QVERIFY(!fixture.states.contains(Connection::State::Connected));
    QVERIFY(!fixture.states.contains(Connection::State::Reconnecting));
    QCOMPARE(fixture.states.first(), Connection::State::Connecting);
    QVERIFY2(fixture.details.last().contains(QStringLiteral("retrying in")) ||
                 fixture.details.last() == address,
             qPrintable(fixture.details.last()));

    fixture.post([](Connection* c) { c->disconnectFromServer(); });
    QTRY_COMPARE(fixture.states.last(), Connection::State::Disconnected);
    // idle(): no feed call runs and no retry or lookup timer is pending, so
    // nothing is left that could start another attempt. A disconnect that
    // left a retry timer running would never report it.
    QTRY_COMPARE_WITH_TIMEOUT(fixture.idles, 1, 10000);
    const int retries = fixture.delays.size();
    const int attempts = fixture.attempts();
    QVERIFY(attempts >= 4);
    fixture.sync();
    QCOMPARE(fixture.delays.size(), retries);  // no more attempts once disconnected
    QCOMPARE(fixture.attempts(), attempts);
    QCOMPARE(fixture.idles, 1);
  }

  // Two replicas behind an ipv4: list, nobody answering: one feed per
  // replica, each with its own back-off, overall still Connecting.
  void oneFeedPerReplicaOfAnIpv4List() {
    ConnectionOptions options;
    options.initialBackoffMs = 50;
    options.maxBackoffMs = 100;
    options.probeTimeoutMs = 200;
    ConnectionFixture fixture(options);
    const QString a = QStringLiteral("127.0.0.1:%1").arg(closedPort());
    QString b = a;
    while (b == a) b = QStringLiteral("127.0.0.1:%1").arg(closedPort());
    const QString target = QStringLiteral("ipv4:%1,%2").arg(a, b);
    fixture.post([target](Connection* c) { c->connectTo(target); });
    QTRY_COMPARE_WITH_TIMEOUT(fixture.replicas, QStringList({a, b}), 10000);
    QTRY_VERIFY_WITH_TIMEOUT(
        fixture.delayReplicas.count(a) >= 2 && fixture.delayReplicas.count(b) >= 2, 15000);
    QCOMPARE(fixture.replicaStates.value(a), Connection::State::Connecting);
    QCOMPARE(fixture.replicaStates.value(b), Connection::State::Connecting);
    QVERIFY(!fixture.states.contains(Connection::State::Connected));
    QVERIFY2(fixture.details.last().contains(QStringLiteral("0 of 2 replicas connected")),
             qPrintable(fixture.details.last()));
    fixture.post([](Connection* c) { c->disconnectFromServer(); });
    QTRY_COMPARE_WITH_TIMEOUT(fixture.idles, 1, 10000);
  }

  // A dns: name is looked up again when a replica's feed ends: a replica
  // whose address left the answer (scaled down) loses its feed; a failed
  // lookup is retried with back-off and named in the state.
  void dnsTargetFollowsTheAnswer() {
    ConnectionOptions options;
    options.initialBackoffMs = 50;
    options.maxBackoffMs = 100;
    options.probeTimeoutMs = 200;
    const int pa = closedPort();
    int pb = pa;
    while (pb == pa) pb = closedPort();
    const QString a = QStringLiteral("127.0.0.1:%1").arg(pa);
    const QString b = QStringLiteral("127.0.0.1:%1").arg(pb);
    auto lookups = std::make_shared<std::atomic<int>>(0);
    options.resolver = [a, b, lookups](const QString& target) {
      const int n = ++*lookups;
      ResolvedTarget resolved;
      if (n == 1) {
        resolved.error = QStringLiteral("'%1': cannot resolve (test)").arg(target);
      } else {
        resolved.replicas.append({a, QStringLiteral("ipv4:") + a});
        if (n == 2) resolved.replicas.append({b, QStringLiteral("ipv4:") + b});
      }
      return resolved;
    };
    ConnectionFixture fixture(options);
    fixture.post([](Connection* c) { c->connectTo(QStringLiteral("dns:///attnscope.test:50051")); });
    QTRY_VERIFY_WITH_TIMEOUT(fixture.details.join(QLatin1Char('\n')).contains(
                                 QStringLiteral("cannot resolve (test)")),
                             10000);
    QVERIFY(fixture.delayReplicas.contains(QString()));  // the lookup's own retry
    QTRY_COMPARE_WITH_TIMEOUT(fixture.replicas, QStringList({a}), 15000);
    QVERIFY(fixture.replicaStates.contains(b));  // b had a feed before it left the answer
    QVERIFY(lookups->load() >= 3);
    fixture.post([](Connection* c) { c->disconnectFromServer(); });
    QTRY_COMPARE_WITH_TIMEOUT(fixture.idles, 1, 10000);
  }

  // dns: is looked up by the dashboard (localhost: /etc/hosts, no network).
  void dnsTargetIsLookedUp() {
    ConnectionOptions options;
    options.probeTimeoutMs = 200;
    ConnectionFixture fixture(options);
    const int port = closedPort();
    const QString target = QStringLiteral("dns:///localhost:%1").arg(port);
    fixture.post([target](Connection* c) { c->connectTo(target); });
    QTRY_VERIFY_WITH_TIMEOUT(!fixture.replicas.isEmpty(), 10000);
    const QString v4 = QStringLiteral("127.0.0.1:%1").arg(port);
    const QString v6 = QStringLiteral("[::1]:%1").arg(port);
    for (const QString& replica : fixture.replicas) {
      QVERIFY2(replica == v4 || replica == v6, qPrintable(replica));
    }
  }

  void analyzeWithoutServerFails_data() {
    QTest::addColumn<bool>("eviction");
    QTest::addColumn<bool>("withAddress");
    QTest::addColumn<QString>("errorPart");
    QTest::newRow("never connected") << false << false << "not connected";
    QTest::newRow("server unreachable") << false << true << "UNAVAILABLE";
    QTest::newRow("eviction, never connected") << true << false << "not connected";
    QTest::newRow("eviction, server unreachable") << true << true << "UNAVAILABLE";
  }

  // Analyze, or EvaluateEviction (same call path, its own signals).
  void analyzeWithoutServerFails() {
    QFETCH(bool, eviction);
    QFETCH(bool, withAddress);
    QFETCH(QString, errorPart);
    ConnectionOptions options;
    options.probeTimeoutMs = 300;
    options.callTimeoutMs = 5000;
    ConnectionFixture fixture(options);
    if (withAddress) {
      const QString address = QStringLiteral("127.0.0.1:%1").arg(closedPort());
      fixture.post([address](Connection* c) { c->connectTo(address); });
    }
    if (eviction) {
      attnscope::v1::EvaluateEvictionRequest request;
      request.set_text("hello");
      request.add_policies("full");
      fixture.post([request](Connection* c) { c->evaluateEviction(7, request); });
    } else {
      attnscope::v1::AnalyzeRequest request;
      request.set_text("hello");
      fixture.post([request](Connection* c) { c->analyze(7, request); });
    }
    QTRY_COMPARE_WITH_TIMEOUT(fixture.finished.size(), 1, 10000);
    QCOMPARE(fixture.finished.first(), quint64(7));
    QVERIFY(!fixture.okays.first());
    QVERIFY2(fixture.errors.first().contains(errorPart), qPrintable(fixture.errors.first()));
  }

  void stateNames() {
    QCOMPARE(Connection::stateName(Connection::State::Reconnecting),
             QStringLiteral("Reconnecting"));
    QCOMPARE(Connection::stateName(Connection::State::Disconnected),
             QStringLiteral("Disconnected"));
  }
};

ATTNSCOPE_REGISTER_TEST(ConnectionTest)

}  // namespace attnscope::dashboard

#include "connection_test.moc"
