#include "tests/deploy/dashboard_watch.h"

#include <stdlib.h>

#include <QApplication>
#include <QComboBox>
#include <QDir>
#include <QElapsedTimer>
#include <QPlainTextEdit>
#include <QSettings>
#include <QTableView>
#include <QThread>

#include "client/ui/connection_indicator.h"
#include "client/ui/feed_panel.h"
#include "client/ui/main_window.h"
#include "client/ui/send_panel.h"

namespace attnscope::deploy::testing {

using dashboard::Connection;
using dashboard::FeedRow;

struct DashboardWatch::Impl {
  int argc = 1;
  char arg0[32] = "deploy_replicas_test";
  char* argv[2] = {arg0, nullptr};
  std::string settingsDir;
  std::unique_ptr<QApplication> app;
  std::unique_ptr<dashboard::MainWindow> window;
};

namespace {

dashboard::ConnectionOptions fastReconnect() {
  dashboard::ConnectionOptions options;
  options.initialBackoffMs = 100;
  options.maxBackoffMs = 1000;
  options.probeTimeoutMs = 2000;
  return options;
}

const char* stateName(FeedRow::State state) {
  switch (state) {
    case FeedRow::State::Running:
      return "running";
    case FeedRow::State::Finished:
      return "finished";
    case FeedRow::State::Failed:
      return "failed";
    case FeedRow::State::Lost:
      return "lost";
  }
  return "";
}

}  // namespace

DashboardWatch::DashboardWatch(const std::string& target) : impl_(std::make_unique<Impl>()) {
  qputenv("QT_QPA_PLATFORM", "offscreen");
  char dir[] = "/tmp/attnscope-dashboard-settings-XXXXXX";
  if (mkdtemp(dir) != nullptr) impl_->settingsDir = dir;
  impl_->app = std::make_unique<QApplication>(impl_->argc, impl_->argv);
  QCoreApplication::setOrganizationName(QStringLiteral("attnscope-test"));
  QCoreApplication::setApplicationName(QStringLiteral("dashboard-replicas"));
  QSettings::setPath(QSettings::NativeFormat, QSettings::UserScope,
                     QString::fromStdString(impl_->settingsDir));
  impl_->window = std::make_unique<dashboard::MainWindow>(QString::fromStdString(target),
                                                          fastReconnect());
  impl_->window->resize(1600, 1000);
  impl_->window->show();
}

DashboardWatch::~DashboardWatch() {
  impl_->window.reset();
  impl_->app.reset();
  if (!impl_->settingsDir.empty()) {
    QDir(QString::fromStdString(impl_->settingsDir)).removeRecursively();
  }
}

bool DashboardWatch::WaitUntil(const std::function<bool()>& done, int timeoutMs) {
  QElapsedTimer timer;
  timer.start();
  while (!done()) {
    if (timer.elapsed() > timeoutMs) return false;
    QCoreApplication::processEvents(QEventLoop::AllEvents, 20);
    QThread::msleep(10);
  }
  return true;
}

std::set<std::string> DashboardWatch::Replicas() const {
  std::set<std::string> replicas;
  for (const QString& r : impl_->window->replicas()) replicas.insert(r.toStdString());
  return replicas;
}

bool DashboardWatch::AllConnected() const {
  return impl_->window->connectionState() == Connection::State::Connected;
}

std::string DashboardWatch::ReplicaState(const std::string& replica) const {
  return Connection::stateName(
             impl_->window->connectionIndicator()->replicaState(QString::fromStdString(replica)))
      .toStdString();
}

std::string DashboardWatch::IndicatorText() const {
  return impl_->window->connectionIndicator()->text().toStdString();
}

int DashboardWatch::ReplicaSubscriptions(const std::string& replica) const {
  return impl_->window->replicaSubscriptions(QString::fromStdString(replica));
}

std::set<std::string> DashboardWatch::ReplicasWithFinishedRows(const std::string& prefix) const {
  std::set<std::string> replicas;
  const dashboard::FeedModel& feed = *impl_->window->feedModel();
  for (int i = 0; i < feed.rowCount(); ++i) {
    const FeedRow* row = feed.rowAt(i);
    if (row->state == FeedRow::State::Finished &&
        row->promptPreview.startsWith(QString::fromStdString(prefix))) {
      replicas.insert(row->replica.toStdString());
    }
  }
  return replicas;
}

unsigned long long DashboardWatch::LatestSession(const std::string& replica) const {
  unsigned long long latest = 0;
  const dashboard::FeedModel& feed = *impl_->window->feedModel();
  for (int i = 0; i < feed.rowCount(); ++i) {
    const FeedRow* row = feed.rowAt(i);
    if (row->replica.toStdString() == replica && row->session > latest) latest = row->session;
  }
  return latest;
}

int DashboardWatch::Rows(const std::string& replica, unsigned long long minSession,
                         const char* state) const {
  int rows = 0;
  const dashboard::FeedModel& feed = *impl_->window->feedModel();
  for (int i = 0; i < feed.rowCount(); ++i) {
    const FeedRow* row = feed.rowAt(i);
    rows += row->replica.toStdString() == replica && row->session >= minSession &&
            std::string(stateName(row->state)) == state;
  }
  return rows;
}

int DashboardWatch::RowCount() const { return impl_->window->feedModel()->rowCount(); }

bool DashboardWatch::ReplicaColumnShown() const {
  return !impl_->window->feedPanel()->table()->isColumnHidden(dashboard::FeedModel::Replica);
}

int DashboardWatch::RowsShownFilteredTo(const std::string& replica) {
  dashboard::FeedPanel* panel = impl_->window->feedPanel();
  QComboBox* combo = panel->replicaCombo();
  const int index = combo->findData(QString::fromStdString(replica));
  if (index < 0 || combo->isHidden()) return -1;
  combo->setCurrentIndex(index);
  int rows = panel->proxy()->rowCount();
  for (int r = 0; r < panel->proxy()->rowCount(); ++r) {
    if (panel->proxy()->index(r, 0).data(dashboard::FeedModel::ReplicaRole).toString() !=
        QString::fromStdString(replica)) {
      rows = -1;
    }
  }
  combo->setCurrentIndex(0);
  return rows;
}

std::string DashboardWatch::SendFromBox(const std::string& text) {
  dashboard::SendPanel* send = impl_->window->sendPanel();
  send->setGenerate(false);
  send->setPromptText(QString::fromStdString(text));
  send->send();
  WaitUntil([&] { return send->statusText().startsWith(QStringLiteral("done")) ||
                         send->statusText().contains(QStringLiteral("failed")); },
            60000);
  return send->statusText().toStdString();
}

bool DashboardWatch::Screenshot(const std::string& path) {
  QCoreApplication::processEvents();
  return impl_->window->grab().save(QString::fromStdString(path));
}

}  // namespace attnscope::deploy::testing
