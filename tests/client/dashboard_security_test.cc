// The dashboard against a server with TLS and a bearer token: the real
// attnscope-server (certificates made by openssl at test time), the real
// MainWindow offscreen, the attnscope CLI as the other user. Also: the
// settings keep the file paths and never the token, a wrong token or a
// plaintext connection says why it fails, and after kill -9 and a restart
// on the same port the dashboard reconnects by itself. Mutual TLS: with the
// client certificate and key the dashboard connects, sends and shows the
// analysis; without them, or with a certificate of another CA, it is
// refused and its status bar says why.
#include <QPlainTextEdit>
#include <QProcess>
#include <QSettings>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>
#include <cmath>

#include "client/connection/connection.h"
#include "client/models/heatmap_model.h"
#include "client/ui/connection_indicator.h"
#include "client/ui/main_window.h"
#include "client/ui/prompt_view.h"
#include "client/ui/send_panel.h"
#include "tests/client/server_process.h"
#include "tests/client/window_test_support.h"
#include "tests/rpc/test_certs.h"

namespace attnscope::dashboard {
namespace {

using testing::ServerProcess;

constexpr char kToken[] = "dashboard-token-0123456789abcdef";
constexpr int kLong = 90000;  // ms: loading a model on a busy 2-core machine

// A TLS handshake on a busy machine: attempts wait up to 5 s.
ConnectionOptions fastReconnect(const ConnectionSecurity& security) {
  return testing::fastReconnect(security, 5000);
}

QString q(const std::string& s) { return QString::fromStdString(s); }

class DashboardSecurityTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(testing::useTestSettings(m_settingsDir, QStringLiteral("dashboard-security")));
    QVERIFY2(!attnscope::testing::MakeTestCerts().dir.empty(), "openssl failed");
    m_tokenFile = q(attnscope::testing::WriteSecretFile("dashboard-token",
                                                        std::string(kToken) + "\n"));
  }

  void connectsWithTlsAndTokenAndReconnectsAfterKill();
  void wrongTokenAndPlaintextSayWhy();
  void mutualTlsConnectsAndShowsResults();
  void mutualTlsWithoutTheClientCertificateIsRefused();

 private:
  // TLS that requires client certificates signed by the test CA.
  static QStringList mutualTlsFlags() {
    const auto& certs = attnscope::testing::MakeTestCerts();
    return {QStringLiteral("--tls-cert"), q(certs.server_cert), QStringLiteral("--tls-key"),
            q(certs.server_key), QStringLiteral("--tls-client-ca"), q(certs.ca)};
  }
  QStringList serverFlags() const {
    const auto& certs = attnscope::testing::MakeTestCerts();
    return {QStringLiteral("--tls-cert"), q(certs.server_cert), QStringLiteral("--tls-key"),
            q(certs.server_key), QStringLiteral("--auth-token-file"), m_tokenFile};
  }
  // attnscope analyze through TLS + token from the CLI: the other user.
  void analyzeFromCli(const QString& address, const QString& text) {
    QProcess cli;
    cli.start(QStringLiteral(ATTNSCOPE_BIN_DIR "/attnscope"),
              {QStringLiteral("--server"), address, QStringLiteral("--tls-ca"),
               q(attnscope::testing::MakeTestCerts().ca), QStringLiteral("--auth-token-file"),
               m_tokenFile, QStringLiteral("analyze"), QStringLiteral("--text"), text});
    QVERIFY(cli.waitForFinished(kLong));
    QVERIFY2(cli.exitCode() == 0, cli.readAllStandardError().constData());
  }
  static bool finished(const FeedModel& feed, const QString& text) {
    for (int i = 0; i < feed.rowCount(); ++i) {
      const FeedRow* row = feed.rowAt(i);
      if (row->promptPreview == text && row->state == FeedRow::State::Finished) return true;
    }
    return false;
  }

  QTemporaryDir m_settingsDir;
  QString m_tokenFile;
};

void DashboardSecurityTest::connectsWithTlsAndTokenAndReconnectsAfterKill() {
  ServerProcess server;
  QVERIFY2(server.start(0, kLong, serverFlags()), qPrintable(server.error()));
  ConnectionSecurity security;
  security.caFile = q(attnscope::testing::MakeTestCerts().ca);
  security.tokenFile = m_tokenFile;
  MainWindow window(server.address(), fastReconnect(security));
  QTRY_COMPARE_WITH_TIMEOUT(window.connectionState(), Connection::State::Connected, kLong);
  QTRY_COMPARE_WITH_TIMEOUT(window.subscriptions(), 1, kLong);
  const QString text = QStringLiteral("Seen through TLS with a token");
  analyzeFromCli(server.address(), text);
  QTRY_VERIFY_WITH_TIMEOUT(finished(*window.feedModel(), text), kLong);

  // The paths are remembered; the token is in no setting.
  QSettings settings;
  QCOMPARE(settings.value(QStringLiteral("server/tlsCaFile")).toString(), security.caFile);
  QCOMPARE(settings.value(QStringLiteral("server/tokenFile")).toString(), m_tokenFile);
  for (const QString& key : settings.allKeys()) {
    QVERIFY2(!settings.value(key).toString().contains(QLatin1String(kToken)), qPrintable(key));
  }

  const int port = server.port();
  server.kill();
  QTRY_VERIFY_WITH_TIMEOUT(window.connectionState() != Connection::State::Connected, kLong);
  QVERIFY2(server.start(port, kLong, serverFlags()), qPrintable(server.error()));
  QTRY_COMPARE_WITH_TIMEOUT(window.subscriptions(), 2, kLong);
  QCOMPARE(window.connectionState(), Connection::State::Connected);
  const QString after = QStringLiteral("After kill -9 and restart");
  analyzeFromCli(server.address(), after);
  QTRY_VERIFY_WITH_TIMEOUT(finished(*window.feedModel(), after), kLong);

  // A new window without explicit security uses the remembered files.
  MainWindow second(server.address(), fastReconnect(ConnectionSecurity()));
  QCOMPARE(second.security(), security);
  QTRY_COMPARE_WITH_TIMEOUT(second.connectionState(), Connection::State::Connected, kLong);
}

// The state detail of `connection` once it mentions `text` ("" if never).
QString detailMentioning(Connection& connection, const QString& text) {
  QSignalSpy spy(&connection, &Connection::stateChanged);
  QString seen;
  (void)QTest::qWaitFor(
      [&] {
        for (const QList<QVariant>& args : spy) {
          if (args.at(1).toString().contains(text)) seen = args.at(1).toString();
        }
        return !seen.isEmpty();
      },
      kLong);
  return seen;
}

void DashboardSecurityTest::wrongTokenAndPlaintextSayWhy() {
  ServerProcess server;
  QVERIFY2(server.start(0, kLong, serverFlags()), qPrintable(server.error()));
  ConnectionSecurity wrong;
  wrong.caFile = q(attnscope::testing::MakeTestCerts().ca);
  wrong.tokenFile = q(attnscope::testing::WriteSecretFile("wrong-dashboard-token",
                                                          "not-the-right-token-at-all\n"));
  {
    Connection connection(fastReconnect(wrong));
    connection.connectTo(server.address());
    const QString detail = detailMentioning(connection, QStringLiteral("UNAUTHENTICATED"));
    QVERIFY2(detail.contains(QStringLiteral("the bearer token is wrong")), qPrintable(detail));
    QVERIFY(connection.state() != Connection::State::Connected);
    connection.shutdown();
  }
  {
    Connection connection(fastReconnect(ConnectionSecurity()));
    connection.connectTo(server.address());
    // UNAVAILABLE, or DEADLINE_EXCEEDED when the probe's wait runs out first.
    const QString detail = detailMentioning(connection, QStringLiteral("if the server uses TLS"));
    QVERIFY2(!detail.isEmpty(), "no state detail with a hint about TLS");
    connection.shutdown();
  }
  {
    ConnectionSecurity missing = wrong;
    missing.tokenFile = QStringLiteral("/nonexistent/token");
    Connection connection(fastReconnect(missing));
    connection.connectTo(server.address());
    const QString detail = detailMentioning(connection, QStringLiteral("/nonexistent/token"));
    QVERIFY2(detail.contains(QStringLiteral("cannot be read")), qPrintable(detail));
    connection.shutdown();
  }
}

void DashboardSecurityTest::mutualTlsConnectsAndShowsResults() {
  ServerProcess server;
  QVERIFY2(server.start(0, kLong, mutualTlsFlags()), qPrintable(server.error()));
  const auto& certs = attnscope::testing::MakeTestCerts();
  ConnectionSecurity security;
  security.caFile = q(certs.ca);
  security.certFile = q(certs.client_cert);
  security.keyFile = q(certs.client_key);
  MainWindow window(server.address(), fastReconnect(security));
  window.resize(1600, 1000);
  window.show();
  window.activateWindow();  // shortcuts need the active window
  QVERIFY(QTest::qWaitForWindowActive(&window));
  QTRY_COMPARE_WITH_TIMEOUT(window.connectionState(), Connection::State::Connected, kLong);
  QTRY_COMPARE_WITH_TIMEOUT(window.subscriptions(), 1, kLong);
  QVERIFY2(window.connectionIndicator()->text().startsWith(QStringLiteral("Connected")),
           qPrintable(window.connectionIndicator()->text()));

  // Sent from the send box (Ctrl+Return): the analysis comes back over
  // mutual TLS, the feed (Subscribe, also over mutual TLS) shows it finished
  // with the same numbers, and the heatmap's head is fetched.
  const QString text = QStringLiteral("Mutual TLS: the dashboard shows its certificate.");
  window.sendPanel()->setPromptText(text);
  window.sendPanel()->promptEdit()->setFocus();
  QTest::keyClick(window.windowHandle(), Qt::Key_Return, Qt::ControlModifier);
  QTRY_VERIFY_WITH_TIMEOUT(finished(*window.feedModel(), text), kLong);
  QTRY_VERIFY_WITH_TIMEOUT(window.analysis()->isComplete(), kLong);
  const PromptAnalysis& analysis = *window.analysis();
  QCOMPARE(analysis.errors(), QStringList());
  QVERIFY(analysis.tokenCount() > 5);
  QVERIFY(analysis.layerCount() > 0);
  const FeedRow* row = window.feedModel()->rowAt(0);
  QCOMPARE(row->promptPreview, text);
  QCOMPARE(row->status, QStringLiteral("OK"));
  QCOMPARE(row->promptTokens, analysis.tokenCount());
  QCOMPARE(row->sinkCount, analysis.summary()->sinks_size());
  QVERIFY2(std::fabs(row->health - analysis.summary()->health()) <= 1e-9,
           qPrintable(QStringLiteral("%1 vs %2").arg(row->health).arg(analysis.summary()->health())));
  QTRY_VERIFY_WITH_TIMEOUT(window.promptView()->heatmapModel()->hasWeights(), kLong);
  QTRY_VERIFY(window.sendPanel()->statusText().startsWith(QStringLiteral("done")));

  // The certificate and key paths are remembered.
  QSettings settings;
  QCOMPARE(settings.value(QStringLiteral("server/tlsCertFile")).toString(), security.certFile);
  QCOMPARE(settings.value(QStringLiteral("server/tlsKeyFile")).toString(), security.keyFile);

  const QString path =
      QStringLiteral(ATTNSCOPE_TEST_OUTPUT_DIR "/dashboard-mtls-screenshot.png");
  const QImage shot = window.grab().toImage();
  QVERIFY2(shot.save(path), qPrintable(path));
  QCOMPARE(QImage(path).size(), shot.size());
  qInfo("screenshot: %s", qPrintable(path));
}

void DashboardSecurityTest::mutualTlsWithoutTheClientCertificateIsRefused() {
  ServerProcess server;
  QVERIFY2(server.start(0, kLong, mutualTlsFlags()), qPrintable(server.error()));
  const auto& certs = attnscope::testing::MakeTestCerts();
  // The status bar's text once it mentions `hint` ("" if never).
  const auto refusal = [](const MainWindow& window, const QString& hint) {
    QString seen;
    (void)QTest::qWaitFor(
        [&] {
          const QString text = window.connectionIndicator()->text();
          if (text.contains(hint)) seen = text;
          return !seen.isEmpty();
        },
        kLong);
    return seen;
  };
  {
    ConnectionSecurity caOnly;
    caOnly.caFile = q(certs.ca);
    MainWindow window(server.address(), fastReconnect(caOnly));
    window.show();
    const QString text =
        refusal(window, QStringLiteral("give --tls-cert and --tls-key"));
    QVERIFY2(!text.isEmpty(), qPrintable(window.connectionIndicator()->text()));
    QVERIFY2(text.contains(QStringLiteral("client certificates")), qPrintable(text));
    QVERIFY(window.connectionState() != Connection::State::Connected);
    QCOMPARE(window.subscriptions(), 0);
  }
  {
    // A client certificate the server's --tls-client-ca did not sign.
    ConnectionSecurity intruder;
    intruder.caFile = q(certs.ca);
    intruder.certFile = q(certs.other_client_cert);
    intruder.keyFile = q(certs.other_client_key);
    MainWindow window(server.address(), fastReconnect(intruder));
    window.show();
    const QString text =
        refusal(window, QStringLiteral("check that its --tls-client-ca signed --tls-cert"));
    QVERIFY2(!text.isEmpty(), qPrintable(window.connectionIndicator()->text()));
    QVERIFY(window.connectionState() != Connection::State::Connected);
    QCOMPARE(window.subscriptions(), 0);
  }
}

}  // namespace
}  // namespace attnscope::dashboard

QTEST_MAIN(attnscope::dashboard::DashboardSecurityTest)
#include "dashboard_security_test.moc"
