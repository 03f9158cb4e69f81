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

#include "attnscope_version.h"

#include "client/connection/target.h"
#include "client/ui/main_window.h"

int main(int argc, char** argv) {
  // The command line is parsed before QApplication exists, so that --help,
  // --version and every usage error need no display.
  QStringList arguments;
  for (int i = 0; i < argc; ++i) arguments << QString::fromLocal8Bit(argv[i]);
  QCommandLineParser parser;
  parser.setApplicationDescription(QStringLiteral("Live dashboard for attnscope-server"));
  const QCommandLineOption help = parser.addHelpOption();
  const QCommandLineOption version = parser.addVersionOption();
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
  if (!parser.parse(arguments)) {
    std::fprintf(stderr, "attnscope-dashboard: %s (see --help)\n", qPrintable(parser.errorText()));
    return 2;
  }
  if (parser.isSet(version)) {
    std::printf("attnscope-dashboard %s (git %s)\n", attnscope::kAttnscopeVersion,
                attnscope::kAttnscopeGitRevision);
    return 0;
  }
  if (parser.isSet(help) || parser.isSet(QStringLiteral("help-all"))) {
    // helpText() names the program from QCoreApplication, which does not
    // exist yet: its usage line is rewritten with the binary's name.
    QString text = parser.helpText();
    const qsizetype options = text.indexOf(QStringLiteral(" [options]"));
    if (options >= 0) {
      text.replace(0, options, QStringLiteral("Usage: attnscope-dashboard"));
    }
    std::printf("%s", qPrintable(text));
    return 0;
  }
  if (!parser.positionalArguments().isEmpty()) {
    std::fprintf(stderr, "attnscope-dashboard: unexpected argument '%s' (see --help)\n",
                 qPrintable(parser.positionalArguments().first()));
    return 2;
  }
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

  QApplication app(argc, argv);
  QApplication::setOrganizationName(QStringLiteral("attnscope"));
  QApplication::setApplicationName(QStringLiteral("dashboard"));
  QApplication::setApplicationVersion(QString::fromLatin1(attnscope::kAttnscopeVersion));
  attnscope::dashboard::MainWindow window(address, options);
  window.show();
  return app.exec();
}
