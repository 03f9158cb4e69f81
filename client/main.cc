// attnscope-dashboard: watch an attnscope-server's requests live and explore
// a prompt's attention.
//
//   attnscope-dashboard [--server HOST:PORT | --server TARGET]
//
// TARGET: a gRPC target URI of several replicas (dns:///HOST:PORT,
// ipv4:ADDR:PORT,ADDR:PORT,...): the feed merges every replica's, requests
// go round robin. Without --server, the last server used (or
// 127.0.0.1:50051).
#include <QApplication>
#include <QCommandLineParser>
#include <cstdio>
#include <cstring>

#include "attnscope_version.h"

#include "client/connection/target.h"
#include "client/ui/main_window.h"

int main(int argc, char** argv) {
  // Answered before QApplication exists, so it needs no display.
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--version") == 0 || std::strcmp(argv[i], "-v") == 0) {
      std::printf("attnscope-dashboard %s (git %s)\n", attnscope::kAttnscopeVersion,
                  attnscope::kAttnscopeGitRevision);
      return 0;
    }
  }
  QApplication app(argc, argv);
  QApplication::setOrganizationName(QStringLiteral("attnscope"));
  QApplication::setApplicationName(QStringLiteral("dashboard"));
  QApplication::setApplicationVersion(QString::fromLatin1(attnscope::kAttnscopeVersion));

  QCommandLineParser parser;
  parser.setApplicationDescription(QStringLiteral("Live dashboard for attnscope-server"));
  parser.addHelpOption();
  parser.addVersionOption();
  const QCommandLineOption server(QStringLiteral("server"),
                                  QStringLiteral("The server to connect to (default: the last one, "
                                                 "else 127.0.0.1:50051), or a gRPC target of "
                                                 "several replicas: dns:///HOST:PORT (every "
                                                 "address DNS returns), ipv4:ADDR:PORT,ADDR:PORT"),
                                  QStringLiteral("HOST:PORT|TARGET"));
  parser.addOption(server);
  parser.process(app);
  const QString address = parser.value(server);
  const QString problem = address.isEmpty() ? QString() : attnscope::dashboard::checkTarget(address);
  if (!problem.isEmpty()) {
    std::fprintf(stderr, "attnscope-dashboard: --server %s\n", qPrintable(problem));
    return 2;
  }
  attnscope::dashboard::MainWindow window(address);
  window.show();
  return app.exec();
}
