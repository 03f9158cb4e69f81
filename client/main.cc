// attnscope-dashboard: watch an attnscope-server's requests live and explore
// a prompt's attention.
//
//   attnscope-dashboard [--server HOST:PORT | --server TARGET] [--tls-ca FILE]
//                       [--tls-cert FILE --tls-key FILE] [--auth-token-file FILE]
//
// TARGET: a gRPC target URI of several replicas (dns:///HOST:PORT,
// ipv4:ADDR:PORT,ADDR:PORT,...): the feed merges every replica's, requests
// go round robin. Without --server, the last server used (or
// 127.0.0.1:50051); without any TLS or token option, the files last used
// (Settings).
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
  const QCommandLineOption ca(QStringLiteral("tls-ca"),
                              QStringLiteral("Connect over TLS, trusting this PEM CA."),
                              QStringLiteral("FILE"));
  const QCommandLineOption cert(QStringLiteral("tls-cert"),
                                QStringLiteral("PEM client certificate (mutual TLS)."),
                                QStringLiteral("FILE"));
  const QCommandLineOption key(QStringLiteral("tls-key"),
                               QStringLiteral("PEM private key of --tls-cert."),
                               QStringLiteral("FILE"));
  const QCommandLineOption token(
      QStringLiteral("auth-token-file"),
      QStringLiteral("Send the token on this file's first line as a bearer token (default: "
                     "$ATTNSCOPE_TOKEN). Only the path is remembered, never the token."),
      QStringLiteral("FILE"));
  parser.addOptions({ca, cert, key, token});
  parser.process(app);
  attnscope::dashboard::ConnectionOptions options;
  options.security.caFile = parser.value(ca);
  options.security.certFile = parser.value(cert);
  options.security.keyFile = parser.value(key);
  options.security.tokenFile = parser.value(token);
  if (options.security.certFile.isEmpty() != options.security.keyFile.isEmpty()) {
    std::fprintf(stderr, "attnscope-dashboard: --tls-cert and --tls-key go together\n");
    return 2;
  }
  const QString address = parser.value(server);
  const QString problem = address.isEmpty() ? QString() : attnscope::dashboard::checkTarget(address);
  if (!problem.isEmpty()) {
    std::fprintf(stderr, "attnscope-dashboard: --server %s\n", qPrintable(problem));
    return 2;
  }
  attnscope::dashboard::MainWindow window(address, options);
  window.show();
  return app.exec();
}
