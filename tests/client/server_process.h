// The real attnscope-server as a child process of a test: started on a
// loopback port (0: a free one, read back from its "listening on" line),
// stopped with SIGTERM, restarted on the same port.
#pragma once

#include <QProcess>
#include <QString>

namespace attnscope::dashboard::testing {

class ServerProcess {
 public:
  // The binary next to the test binaries (ATTNSCOPE_BIN_DIR).
  static QString binaryPath();

  ServerProcess() = default;
  ~ServerProcess();  // stops the server if it runs

  // Starts the server on 127.0.0.1:port (with `extraArguments`, e.g.
  // {"--model", "big=DIR"}) and waits up to timeoutMs for it to print its
  // address. Returns false (see error()) if it did not.
  bool start(int port = 0, int timeoutMs = 90000, const QStringList& extraArguments = {});
  // SIGTERM, then SIGKILL after timeoutMs. Returns true if it exited by itself.
  bool stop(int timeoutMs = 20000);
  // SIGKILL (kill -9: no drain, connections just drop) and waits for it.
  void kill();

  int port() const { return m_port; }
  QString address() const { return QStringLiteral("127.0.0.1:%1").arg(m_port); }
  QString error() const { return m_error; }

 private:
  QProcess m_process;
  int m_port = 0;
  QString m_error;
};

}  // namespace attnscope::dashboard::testing
