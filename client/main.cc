// attnscope-dashboard: watch an attnscope-server's requests live and explore
// a prompt's attention.
//
//   attnscope-dashboard [--server HOST:PORT]
//
// Without --server, the last server used (or 127.0.0.1:50051).
#include <QApplication>
#include <QCommandLineParser>
#include <cstdio>
#include <cstring>

#include "attnscope_version.h"

#include "client/ui/main_window.h"
#include "client/ui/settings_dialog.h"

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
                                                 "else 127.0.0.1:50051)."),
                                  QStringLiteral("HOST:PORT"));
  parser.addOption(server);
  parser.process(app);
  const QString address = parser.value(server);
  if (!address.isEmpty() && !attnscope::dashboard::SettingsDialog::isValidAddress(address)) {
    std::fprintf(stderr, "attnscope-dashboard: --server '%s' is not HOST:PORT (port 1..65535)\n",
                 qPrintable(address));
    return 2;
  }
  attnscope::dashboard::MainWindow window(address);
  window.show();
  return app.exec();
}
