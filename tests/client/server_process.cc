#include "tests/client/server_process.h"

#include <QDeadlineTimer>
#include <QFileInfo>
#include <QRegularExpression>

namespace attnscope::dashboard::testing {

QString ServerProcess::binaryPath() {
  return QStringLiteral(ATTNSCOPE_BIN_DIR "/attnscope-server");
}

ServerProcess::~ServerProcess() { stop(5000); }

bool ServerProcess::start(int port, int timeoutMs, const QStringList& extraArguments) {
  m_error.clear();
  if (!QFileInfo(binaryPath()).isExecutable()) {
    m_error = binaryPath() + QStringLiteral(" is missing: build the attnscope-server target");
    return false;
  }
  m_process.setProcessChannelMode(QProcess::SeparateChannels);
  m_process.setProgram(binaryPath());
  const QStringList arguments = {QStringLiteral("--listen"),
                                 QStringLiteral("127.0.0.1:%1").arg(port),
                                 QStringLiteral("--metrics-listen"), QStringLiteral("127.0.0.1:0")};
  m_process.setArguments(arguments + extraArguments);
  m_process.start();
  static const QRegularExpression kListening(
      QStringLiteral(R"(attnscope-server listening on 127\.0\.0\.1:(\d+))"));
  QByteArray output;
  const QDeadlineTimer deadline(timeoutMs);
  while (!deadline.hasExpired() && m_process.state() != QProcess::NotRunning) {
    m_process.waitForReadyRead(100);
    output += m_process.readAllStandardOutput();
    const QRegularExpressionMatch match = kListening.match(QString::fromUtf8(output));
    if (match.hasMatch()) {
      m_port = match.captured(1).toInt();
      return true;
    }
  }
  m_error =
      QStringLiteral(
          "attnscope-server did not report its address within %1 ms; stdout: %2; stderr: %3")
          .arg(timeoutMs)
          .arg(QString::fromUtf8(output), QString::fromUtf8(m_process.readAllStandardError()));
  m_process.kill();
  m_process.waitForFinished(5000);
  return false;
}

bool ServerProcess::stop(int timeoutMs) {
  if (m_process.state() == QProcess::NotRunning) return true;
  m_process.terminate();
  if (m_process.waitForFinished(timeoutMs)) return true;
  m_process.kill();
  m_process.waitForFinished(5000);
  return false;
}

void ServerProcess::kill() {
  if (m_process.state() == QProcess::NotRunning) return;
  m_process.kill();
  m_process.waitForFinished(10000);
}

}  // namespace attnscope::dashboard::testing
