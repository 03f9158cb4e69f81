// ReconnectBackoff and Connection without a server: the delays, the states
// and the failures the GUI sees when nobody answers.
#include "client/connection/connection.h"

#include <QTcpServer>
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
            [this](int delayMs, int) { delays << delayMs; });
    connect(m_connection, &Connection::analyzeFinished, this,
            [this](quint64 tag, bool ok, const QString& error) {
              finished << tag;
              okays << ok;
              errors << error;
            });
  }
  ~ConnectionFixture() override {
    Connection* c = m_connection;
    QMetaObject::invokeMethod(
        c, [c] { c->shutdown(); }, Qt::BlockingQueuedConnection);
    m_thread.quit();
    m_thread.wait();
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
    const int retries = fixture.delays.size();
    QTest::qWait(600);
    QCOMPARE(fixture.delays.size(), retries);  // no more attempts once disconnected
  }

  void analyzeWithoutServerFails_data() {
    QTest::addColumn<bool>("withAddress");
    QTest::addColumn<QString>("errorPart");
    QTest::newRow("never connected") << false << "not connected";
    QTest::newRow("server unreachable") << true << "UNAVAILABLE";
  }

  void analyzeWithoutServerFails() {
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
    attnscope::v1::AnalyzeRequest request;
    request.set_text("hello");
    fixture.post([request](Connection* c) { c->analyze(7, request); });
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
