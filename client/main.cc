// attnscope-dashboard: watch an attnscope-server's requests live and explore
// a prompt's attention.
//
//   attnscope-dashboard [--server HOST:PORT]
//
// Without --server, the last server used (or 127.0.0.1:50051).
#include <QApplication>
#include <QCommandLineParser>
#include <cstdio>

#include "client/ui/main_window.h"
#include "client/ui/settings_dialog.h"

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setOrganizationName(QStringLiteral("attnscope"));
  QApplication::setApplicationName(QStringLiteral("dashboard"));
  QApplication::setApplicationVersion(QStringLiteral("0.1.0"));

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
