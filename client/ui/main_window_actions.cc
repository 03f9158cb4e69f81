// MainWindow's menus, keyboard shortcuts and persisted settings.
#include <QAction>
#include <QApplication>
#include <QLineEdit>
#include <QMenu>
#include <QMenuBar>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QSettings>
#include <QSplitter>
#include <functional>

#include "client/ui/feed_panel.h"
#include "client/ui/main_window.h"
#include "client/ui/prompt_view.h"
#include "client/ui/settings_dialog.h"

namespace attnscope::dashboard {
namespace {

struct Shortcut {
  const char* keys;
  const char* what;
};

// Shown by Help > Keyboard shortcuts; the actions below use the same keys.
constexpr Shortcut kShortcuts[] = {
    {"Ctrl+Return", "send the prompt (analyze, generate or evaluate eviction)"},
    {"Ctrl+L", "focus the feed filter"},
    {"F5", "analyze the shown prompt again"},
    {"Ctrl+,", "settings (server address, feed length)"},
    {"Ctrl+Shift+N", "focus the prompt editor"},
    {"Ctrl+Q", "quit"},
    {"F1", "this list"},
};

QAction* addMenuAction(QMenu* menu, const QString& text, const char* keys, QObject* receiver,
                       std::function<void()> slot) {
  QAction* action = menu->addAction(text);
  action->setShortcut(QKeySequence(QString::fromLatin1(keys)));
  action->setShortcutContext(Qt::WindowShortcut);
  QObject::connect(action, &QAction::triggered, receiver, std::move(slot));
  return action;
}

}  // namespace

void MainWindow::buildActions() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  addMenuAction(file, tr("&Settings…"), "Ctrl+,", this, [this] { openSettings(); });
  file->addSeparator();
  addMenuAction(file, tr("&Quit"), "Ctrl+Q", this, [this] { close(); });

  QMenu* prompt = menuBar()->addMenu(tr("&Prompt"));
  addMenuAction(prompt, tr("&Send"), "Ctrl+Return", this, [this] { m_sendPanel->send(); });
  addMenuAction(prompt, tr("&Re-analyze"), "F5", this, [this] { reanalyze(); });
  addMenuAction(prompt, tr("Edit &prompt"), "Ctrl+Shift+N", this,
                [this] { m_sendPanel->promptEdit()->setFocus(Qt::ShortcutFocusReason); });

  QMenu* view = menuBar()->addMenu(tr("&View"));
  addMenuAction(view, tr("&Filter the feed"), "Ctrl+L", this, [this] { focusFilter(); });

  QMenu* help = menuBar()->addMenu(tr("&Help"));
  addMenuAction(help, tr("&Keyboard shortcuts"), "F1", this, [this] { showShortcuts(); });
}

void MainWindow::focusFilter() {
  m_feedPanel->filterEdit()->setFocus(Qt::ShortcutFocusReason);
  m_feedPanel->filterEdit()->selectAll();
}

void MainWindow::openSettings() {
  SettingsDialog dialog(this);
  dialog.setServerAddress(m_server);
  dialog.setMaxFeedRows(m_feed->maxRows());
  dialog.setSecurity(m_security);
  if (dialog.exec() != QDialog::Accepted) return;
  m_feed->setMaxRows(dialog.maxFeedRows());
  QSettings().setValue(QStringLiteral("feed/maxRows"), dialog.maxFeedRows());
  // Security first: a new address then connects with it.
  if (dialog.security() != m_security) setSecurity(dialog.security());
  if (dialog.serverAddress() != m_server) setServerAddress(dialog.serverAddress());
}

void MainWindow::showShortcuts() {
  QString text = QStringLiteral("<table>");
  for (const Shortcut& s : kShortcuts) {
    text += QStringLiteral("<tr><td><b>%1</b>&nbsp;&nbsp;</td><td>%2</td></tr>")
                .arg(QString::fromLatin1(s.keys), QString::fromLatin1(s.what));
  }
  text += QStringLiteral(
      "</table><p>Hover a heatmap row to see what that token reads; "
      "click a sink-grid cell to open that head.</p>");
  QMessageBox::information(this, tr("Keyboard shortcuts"), text);
}

QList<QSplitter*> MainWindow::persistedSplitters() const {
  return QList<QSplitter*>{m_mainSplitter, m_leftSplitter} + m_promptView->splitters();
}

void MainWindow::restoreSettings() {
  QSettings settings;
  restoreGeometry(settings.value(QStringLiteral("window/geometry")).toByteArray());
  restoreState(settings.value(QStringLiteral("window/state")).toByteArray());
  const int rows = settings.value(QStringLiteral("feed/maxRows"), m_feed->maxRows()).toInt();
  m_feed->setMaxRows(rows);
}

void MainWindow::restoreSplitters() {
  QSettings settings;
  for (QSplitter* splitter : persistedSplitters()) {
    splitter->restoreState(
        settings.value(QStringLiteral("splitters/") + splitter->objectName()).toByteArray());
  }
}

void MainWindow::saveSettings() const {
  QSettings settings;
  settings.setValue(QStringLiteral("window/geometry"), saveGeometry());
  settings.setValue(QStringLiteral("window/state"), saveState());
  for (QSplitter* splitter : persistedSplitters()) {
    settings.setValue(QStringLiteral("splitters/") + splitter->objectName(), splitter->saveState());
  }
  settings.setValue(QStringLiteral("server/address"), m_server);
}

}  // namespace attnscope::dashboard
