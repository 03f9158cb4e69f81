// The dashboard's --server targets: syntax checks with messages that say what
// is wrong, and the replicas each target resolves to (ipv4:/ipv6: lists as
// given, dns: looked up, host:port as one server). No network: dns: is only
// asked for localhost (/etc/hosts).
#include "client/connection/target.h"

#include <QtTest>

#include "tests/client/test_registry.h"

namespace attnscope::dashboard {

class TargetTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void check_data() {
    QTest::addColumn<QString>("target");
    QTest::addColumn<QString>("errorPart");  // empty: accepted
    QTest::newRow("host:port") << "127.0.0.1:50051" << "";
    QTest::newRow("name:port") << "attnscope.example:50051" << "";
    QTest::newRow("[v6]:port") << "[::1]:50051" << "";
    QTest::newRow("dns:///") << "dns:///attnscope-headless:50051" << "";
    QTest::newRow("dns with authority") << "dns://8.8.8.8/attnscope:50051" << "";
    QTest::newRow("dns without slashes") << "dns:attnscope:50051" << "";
    QTest::newRow("ipv4 list") << "ipv4:127.0.0.1:1,127.0.0.1:2" << "";
    QTest::newRow("ipv6 list") << "ipv6:[::1]:1,[::1]:2" << "";
    QTest::newRow("unix") << "unix:/run/attnscope.sock" << "";
    QTest::newRow("no port") << "localhost" << "is not HOST:PORT";
    QTest::newRow("port 0") << "127.0.0.1:0" << "is not HOST:PORT";
    QTest::newRow("port 70000") << "127.0.0.1:70000" << "is not HOST:PORT";
    QTest::newRow("dns no port") << "dns:///attnscope" << "expected dns:///HOST:PORT";
    QTest::newRow("ipv4 bad second") << "ipv4:127.0.0.1:1,10.0.0:2" << "address 2 ('10.0.0:2')";
    QTest::newRow("ipv4 name") << "ipv4:localhost:1" << "is not A.B.C.D:PORT";
    QTest::newRow("ipv4 empty entry") << "ipv4:127.0.0.1:1," << "address 2";
    QTest::newRow("ipv4 port 0") << "ipv4:127.0.0.1:0" << "address 1";
    QTest::newRow("ipv6 unbracketed") << "ipv6:::1:5" << "is not [IPV6]:PORT";
    QTest::newRow("ipv6 v4 address") << "ipv6:[127.0.0.1]:5" << "is not [IPV6]:PORT";
    QTest::newRow("unix empty") << "unix:" << "socket path is empty";
    QTest::newRow("empty") << "" << "is not HOST:PORT";
  }

  void check() {
    QFETCH(QString, target);
    QFETCH(QString, errorPart);
    const QString error = checkTarget(target);
    if (errorPart.isEmpty()) {
      QVERIFY2(error.isEmpty(), qPrintable(error));
      return;
    }
    QVERIFY2(error.contains(errorPart), qPrintable(error));
    QVERIFY2(error.contains(QStringLiteral("'%1'").arg(target)), qPrintable(error));
    const ResolvedTarget resolved = resolveTarget(target);
    QCOMPARE(resolved.error, error);
    QVERIFY(resolved.replicas.isEmpty());
  }

  void resolveLists_data() {
    QTest::addColumn<QString>("target");
    QTest::addColumn<QStringList>("labels");
    QTest::addColumn<QStringList>("channels");
    QTest::newRow("ipv4, duplicates dropped")
        << "ipv4:127.0.0.1:5001, 127.0.0.2:5002,127.0.0.1:5001"
        << QStringList{"127.0.0.1:5001", "127.0.0.2:5002"}
        << QStringList{"ipv4:127.0.0.1:5001", "ipv4:127.0.0.2:5002"};
    QTest::newRow("ipv6") << "ipv6:[::1]:7,[fe80::1]:8" << QStringList{"[::1]:7", "[fe80::1]:8"}
                          << QStringList{"ipv6:[::1]:7", "ipv6:[fe80::1]:8"};
    QTest::newRow("host:port is one server")
        << " localhost:5000 " << QStringList{"localhost:5000"} << QStringList{"localhost:5000"};
    QTest::newRow("unix") << "unix:/tmp/a.sock" << QStringList{"unix:/tmp/a.sock"}
                          << QStringList{"unix:/tmp/a.sock"};
  }

  void resolveLists() {
    QFETCH(QString, target);
    QFETCH(QStringList, labels);
    QFETCH(QStringList, channels);
    const ResolvedTarget resolved = resolveTarget(target);
    QVERIFY2(resolved.error.isEmpty(), qPrintable(resolved.error));
    QStringList gotLabels, gotChannels;
    for (const Replica& r : resolved.replicas) {
      gotLabels << r.label;
      gotChannels << r.channelTarget;
    }
    QCOMPARE(gotLabels, labels);
    QCOMPARE(gotChannels, channels);
    QCOMPARE(targetNeedsLookup(target), false);
  }

  void resolveDnsLocalhost() {
    QVERIFY(targetNeedsLookup(QStringLiteral("dns:///localhost:5000")));
    const ResolvedTarget resolved = resolveTarget(QStringLiteral("dns:///localhost:5000"));
    QVERIFY2(resolved.error.isEmpty(), qPrintable(resolved.error));
    QVERIFY(!resolved.replicas.isEmpty());
    for (const Replica& r : resolved.replicas) {
      QVERIFY2(r.label == QLatin1String("127.0.0.1:5000") || r.label == QLatin1String("[::1]:5000"),
               qPrintable(r.label));
      QCOMPARE(r.channelTarget, (r.label.startsWith(QLatin1Char('[')) ? QStringLiteral("ipv6:")
                                                                      : QStringLiteral("ipv4:")) +
                                    r.label);
    }
    // A literal address needs no name server either.
    const ResolvedTarget literal = resolveTarget(QStringLiteral("dns:///127.0.0.3:9"));
    QCOMPARE(literal.replicas.size(), 1);
    QCOMPARE(literal.replicas.first().label, QStringLiteral("127.0.0.3:9"));
  }
};

ATTNSCOPE_REGISTER_TEST(TargetTest)

}  // namespace attnscope::dashboard

#include "target_test.moc"
