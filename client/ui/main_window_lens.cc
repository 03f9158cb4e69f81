// MainWindow: Lens and Patch runs in their tabs. Both are the dashboard's
// own calls (the server keeps them off the feed): a new run cancels the
// previous one of its kind; events are batched into a redraw at most every
// 100 ms and drawn at once when the run ends.
#include <QTabWidget>
#include <QTimer>

#include "client/ui/lens_view.h"
#include "client/ui/main_window.h"
#include "client/ui/patch_view.h"

namespace attnscope::dashboard {

namespace v1 = attnscope::v1;

void MainWindow::wireLens() {
  connect(m_connection, &Connection::lensEvent, this, &MainWindow::onLensEvent);
  connect(m_connection, &Connection::lensFinished, this, &MainWindow::onLensFinished);
  connect(m_connection, &Connection::patchEvent, this, &MainWindow::onPatchEvent);
  connect(m_connection, &Connection::patchFinished, this, &MainWindow::onPatchFinished);
  connect(m_lensView, &LensView::runRequested, this, &MainWindow::runLens);
  connect(m_patchView, &PatchView::runRequested, this, &MainWindow::runPatch);
  m_lensRedraw = new QTimer(this);
  m_lensRedraw->setSingleShot(true);
  m_lensRedraw->setInterval(100);
  connect(m_lensRedraw, &QTimer::timeout, this, [this] { m_lensView->setRun(m_lensRun); });
  m_patchRedraw = new QTimer(this);
  m_patchRedraw->setSingleShot(true);
  m_patchRedraw->setInterval(100);
  connect(m_patchRedraw, &QTimer::timeout, this, [this] { m_patchView->setRun(m_patchRun); });
}

void MainWindow::runLens() {
  m_detailTabs->setCurrentWidget(m_lensView);
  if (m_controller->shownIds().isEmpty()) {
    m_lensView->setNote(tr("No prompt is shown yet: analyze a prompt or pick one in the feed "
                           "(its tokens are what the lens reads)."),
                        true);
    return;
  }
  m_lensRun = LensRun();
  m_lensRedraw->stop();
  m_lensView->setRun(m_lensRun);
  const int tokens = int(m_controller->shownIds().size());
  m_lensView->setNote(tr("Reading out %n token(s) of the shown prompt…", "", tokens));
  m_controller->lens();
}

void MainWindow::onLensEvent(quint64 tag, const v1::LensEvent& event) {
  if (m_controller->callOf(tag) != DashboardController::Call::Lens) return;
  m_lensRun.addEvent(event);
  if (!m_lensRedraw->isActive()) m_lensRedraw->start();
}

void MainWindow::onLensFinished(quint64 tag, bool ok, const QString& error) {
  if (m_controller->callOf(tag) != DashboardController::Call::Lens) return;
  m_controller->finished(tag);
  m_lensRedraw->stop();
  m_lensView->setRun(m_lensRun);
  if (!ok) {
    m_lensView->setNote(tr("Lens failed: %1").arg(error), true);
    return;
  }
  const v1::LensSummary& summary = m_lensRun.summary();
  m_lensView->setNote(
      tr("Logit lens of %1: %2 hidden states × %3 positions, top 3 tokens per cell (hover a "
         "cell)")
          .arg(QString::fromStdString(summary.model()))
          .arg(m_lensRun.states())
          .arg(m_lensRun.positions().size()));
}

void MainWindow::runPatch(const PatchInput& input) {
  m_detailTabs->setCurrentWidget(m_patchView);
  m_patchRun = PatchRun();
  m_patchRedraw->stop();
  m_patchView->setRun(m_patchRun);
  m_patchView->setNote(tr("Patching %1…").arg(input.residual ? tr("the residual stream")
                                                             : tr("each head's output")));
  m_controller->patch(m_sendPanel->model(), input);
}

void MainWindow::onPatchEvent(quint64 tag, const v1::PatchEvent& event) {
  if (m_controller->callOf(tag) != DashboardController::Call::Patch) return;
  m_patchRun.addEvent(event);
  if (!m_patchRedraw->isActive()) m_patchRedraw->start();
}

void MainWindow::onPatchFinished(quint64 tag, bool ok, const QString& error) {
  if (m_controller->callOf(tag) != DashboardController::Call::Patch) return;
  m_controller->finished(tag);
  m_patchRedraw->stop();
  m_patchView->setRun(m_patchRun);
  if (!ok) {
    m_patchView->setNote(tr("Patch failed: %1").arg(error), true);
    return;
  }
  m_patchView->setNote(tr("%1 patched passes of %2 in %3 s")
                           .arg(m_patchRun.summary().passes())
                           .arg(QString::fromStdString(m_patchRun.summary().model()))
                           .arg(m_patchRun.summary().timings().total_seconds(), 0, 'f', 1));
}

}  // namespace attnscope::dashboard
