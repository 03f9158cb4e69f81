// MainWindow: EvaluateEviction runs in the eviction tab. A send from the
// send panel streams its events into an EvictionRun, redrawn at most every
// 100 ms while it runs and at once when the summary arrives; a finished
// feed row is drawn from what the feed carried (EvictionRun::fromFinished),
// without running it again.
#include <QTabWidget>
#include <QTimer>

#include "client/ui/eviction_view.h"
#include "client/ui/main_window.h"
#include "client/ui/prompt_view.h"

namespace attnscope::dashboard {
namespace {

namespace v1 = attnscope::v1;

// "full 5.21, window:32 9.80" from a run's final perplexities.
QString perplexityLine(const EvictionRun& run) {
  QStringList parts;
  for (const EvictionRun::Policy& p : run.policies()) {
    if (p.done) parts << QStringLiteral("%1 %2").arg(p.name).arg(p.perplexity, 0, 'f', 2);
  }
  return parts.join(QStringLiteral(", "));
}

}  // namespace

void MainWindow::showPromptTab() {
  m_evictionLive = false;
  m_detailTabs->setCurrentWidget(m_promptView);
}

void MainWindow::showEvictionTab() { m_detailTabs->setCurrentWidget(m_evictionView); }

void MainWindow::evaluateEviction(const QString& text, const QString& model,
                                  const QStringList& policies, const QString& positions,
                                  const QVector<qint64>& ids) {
  if (ids.isEmpty()) rememberSent(text);
  m_evictionLive = true;
  m_liveEviction = EvictionRun();
  m_evictionPolicies = policies;
  m_evictionIds = ids;
  m_evictionModel = model;
  m_evictionRedraw->stop();
  m_evictionView->setNote(tr("Evaluating %1…").arg(policies.join(QStringLiteral(", "))));
  redrawEviction();
  showEvictionTab();
  m_controller->evaluateEviction(model, PromptInput{text, ids, {}}, policies, positions);
}

void MainWindow::onEvictionEvent(quint64 tag, const v1::EvaluateEvictionEvent& event) {
  // A send the user has moved on from.
  if (m_controller->callOf(tag) != DashboardController::Call::Eviction) return;
  m_liveEviction.addEvent(event);
  if (event.has_text()) {
    m_evictionIds = QVector<qint64>(event.text().ids().begin(), event.text().ids().end());
    m_sendPanel->setStatus(
        tr("evaluating eviction on %n token(s)…", "", event.text().ids_size()));
  }
  if (event.has_summary()) {
    m_evictionRedraw->stop();
    redrawEviction();
    return;
  }
  if (!m_evictionRedraw->isActive()) m_evictionRedraw->start();
}

void MainWindow::onEvictionFinished(quint64 tag, bool ok, const QString& error) {
  if (m_controller->callOf(tag) != DashboardController::Call::Eviction) return;
  m_controller->finished(tag);
  m_evictionRedraw->stop();
  if (ok) {
    redrawEviction();
    if (m_evictionLive) {
      m_evictionView->setNote(tr("EvaluateEviction on %n token(s), sent from here", "",
                                 m_liveEviction.textTokens()));
    }
    m_sendPanel->setStatus(tr("done: %1").arg(perplexityLine(m_liveEviction)));
    return;
  }
  if (m_evictionLive) {
    redrawEviction();
    m_evictionView->setNote(tr("EvaluateEviction failed: %1").arg(error), true);
  }
  m_sendPanel->setStatus(tr("EvaluateEviction failed: %1").arg(error), true);
}

QString MainWindow::evictionProgressText() const {
  const QVector<EvictionRun::Policy>& policies = m_liveEviction.policies();
  if (policies.isEmpty()) return tr("evaluating eviction…");
  const EvictionRun::Policy& p = policies.last();
  const int steps = p.curve.isEmpty() ? 0 : int(p.curve.last().x());
  return tr("evaluating %1 (%2 of %3): step %4 of %5")
      .arg(p.name)
      .arg(policies.size())
      .arg(qMax(m_evictionPolicies.size(), int(policies.size())))
      .arg(steps)
      .arg(m_liveEviction.stepsTotal());
}

void MainWindow::redrawEviction() {
  if (!m_evictionLive) return;
  m_evictionRun = m_liveEviction;
  m_evictionView->setRun(m_evictionRun);
}

void MainWindow::showEvictionRow(const FeedRow& row) {
  m_controller->leaveShown();
  m_controller->stopWaiting();
  showEvictionTab();
  if (row.state == FeedRow::State::Running) {
    // The user's own send, still running: keep drawing it live.
    if (m_controller->evictionRunning() && row.evictionPolicies == m_evictionPolicies &&
        (m_evictionIds.isEmpty() || row.promptIds == m_evictionIds)) {
      m_evictionLive = true;
      m_evictionView->setNote(tr("Evaluating %1…").arg(row.evictionPolicies.join(QStringLiteral(", "))));
      redrawEviction();
      return;
    }
    m_evictionLive = false;
    m_evictionRun = EvictionRun();
    m_evictionView->setRun(m_evictionRun);
    m_controller->waitFor(row.session, row.requestId);
    m_evictionView->setNote(tr("Still running: shown when it finishes."));
    return;
  }
  m_evictionLive = false;
  m_evictionRun = row.hasEvictionRun() ? EvictionRun::fromFinished(*row.detail) : EvictionRun();
  m_evictionView->setRun(m_evictionRun);
  if (row.state == FeedRow::State::Lost) {
    m_evictionView->setNote(tr("The connection was lost before this run finished."), true);
  } else if (row.state == FeedRow::State::Failed) {
    m_evictionView->setNote(
        tr("EvaluateEviction failed: %1: %2").arg(row.status, row.errorMessage), true);
  } else if (!row.hasEvictionRun()) {
    m_evictionView->setNote(
        tr("The feed no longer holds this run's per-step results (only the newest rows keep "
           "them): send it again to draw it."));
  } else {
    m_evictionView->setNote(tr("EvaluateEviction #%1 on %2: %n token(s), %3 positions", "",
                               row.promptTokens)
                                .arg(row.requestId)
                                .arg(row.model, row.evictionPositions));
  }
}

}  // namespace attnscope::dashboard
