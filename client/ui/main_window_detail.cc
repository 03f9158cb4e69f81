// MainWindow: what the prompt view shows of a feed row, and the attention of
// the one head in the heatmap, fetched on demand as the dashboard's own
// request (origin DASHBOARD) with the shown prompt's exact ids and options.
#include "client/ui/main_window.h"
#include "client/ui/prompt_view.h"

namespace attnscope::dashboard {
namespace {

namespace v1 = attnscope::v1;

}  // namespace

void MainWindow::showFeedDetail(const FeedRow& row) {
  m_controller->leaveShown();
  const v1::RequestFinished& detail = *row.detail;
  QString error;
  if (!m_analysis->loadFinished(detail, fullPromptFor(row), &error)) {
    m_promptView->setNote(tr("The feed's copy of this request is unusable: %1").arg(error), true);
    return;
  }
  m_controller->setShown(
      row.model, QVector<qint64>(detail.tokens().ids().begin(), detail.tokens().ids().end()),
      ChatInput(), detail.options());
  rebuildEntropy();
  onHeadShown(m_promptView->heatmapModel()->layer(), m_promptView->heatmapModel()->head());
}

void MainWindow::onHeadShown(int layer, int head) {
  // Before the summary the layers are still streaming: the summary handler
  // asks again.
  if (!m_analysis->isComplete()) return;
  if (layer < 0 || head < 0 || layer >= m_analysis->layerCount() ||
      head >= m_analysis->headCount() || m_analysis->attention(layer, head) != nullptr) {
    return;
  }
  m_controller->fetchHead(layer, head);
}

void MainWindow::onAttentionEvent(const v1::AnalyzeEvent& event) {
  if (event.has_tokens()) {
    // The fetch must see exactly the prompt shown.
    const QVector<qint64> ids(event.tokens().ids().begin(), event.tokens().ids().end());
    const QVector<qint64>& shown = m_controller->shownIds();
    if (ids != shown) {
      m_promptView->setNote(tr("The server tokenized the prompt differently for the head "
                               "fetch (%1 ids, shown %2): not showing its weights.")
                                .arg(ids.size())
                                .arg(shown.size()),
                            true);
      m_controller->cancelHeadFetch();
    }
    return;
  }
  if (!event.has_attention()) return;
  QString error;
  if (!m_analysis->addFetchedAttention(event.attention(), &error)) {
    m_promptView->setNote(tr("Head weights: %1").arg(error), true);
    m_controller->cancelHeadFetch();
  }
}

}  // namespace attnscope::dashboard
