// MainWindow: what the prompt view shows of a feed row, and the attention of
// the one head in the heatmap, fetched on demand as the dashboard's own
// request (origin DASHBOARD) with the shown prompt's exact ids and options.
#include "client/ui/main_window.h"
#include "client/ui/prompt_view.h"

namespace attnscope::dashboard {
namespace {

namespace v1 = attnscope::v1;

}  // namespace

void MainWindow::cancelCall(quint64 tag) {
  if (tag == 0) return;
  if (tag == m_attentionTag) m_attentionTag = 0;
  Connection* connection = m_connection;
  QMetaObject::invokeMethod(
      connection, [connection, tag] { connection->cancel(tag); }, Qt::QueuedConnection);
}

void MainWindow::leaveShown() {
  if (!m_analyzeIsUsers) cancelCall(m_analyzeTag);
  cancelCall(m_attentionTag);
  m_analyzeTag = 0;
  m_analyzeIsUsers = false;
}

void MainWindow::showFeedDetail(const FeedRow& row) {
  leaveShown();
  const v1::RequestFinished& detail = *row.detail;
  QString error;
  if (!m_analysis->loadFinished(detail, fullPromptFor(row), &error)) {
    m_promptView->setNote(tr("The feed's copy of this request is unusable: %1").arg(error), true);
    return;
  }
  m_shownIds = QVector<qint64>(detail.tokens().ids().begin(), detail.tokens().ids().end());
  m_shownChat = ChatInput();
  m_shownModel = row.model;
  m_shownOptions = detail.options();
  rebuildEntropy();
  onHeadShown(m_promptView->heatmapModel()->layer(), m_promptView->heatmapModel()->head());
}

void MainWindow::onHeadShown(int layer, int head) {
  // Before the summary the layers are still streaming: the summary handler
  // asks again.
  if (!m_analysis->isComplete() || m_shownIds.isEmpty()) return;
  if (layer < 0 || head < 0 || layer >= m_analysis->layerCount() ||
      head >= m_analysis->headCount() || m_analysis->attention(layer, head) != nullptr) {
    return;
  }
  if (m_attentionTag != 0 && m_attentionHead == qMakePair(layer, head)) return;
  fetchAttention(layer, head);
}

void MainWindow::fetchAttention(int layer, int head) {
  cancelCall(m_attentionTag);
  v1::AnalyzeRequest request;
  request.set_model(m_shownModel.toStdString());
  for (const qint64 id : m_shownIds) request.mutable_ids()->add_ids(id);
  // The row's own options (threshold, template, blocks), one head's weights.
  v1::AnalyzeOptions* options = request.mutable_options();
  *options = m_shownOptions;
  options->set_return_attention(true);
  options->clear_attention_layers();
  options->clear_attention_heads();
  options->add_attention_layers(layer);
  options->add_attention_heads(head);
  options->set_attention_dtype(v1::TENSOR_DTYPE_FLOAT32);
  options->set_hidden_state_norms(false);
  request.set_origin(v1::REQUEST_ORIGIN_DASHBOARD);
  const quint64 tag = ++m_nextTag;
  m_attentionTag = tag;
  m_attentionHead = qMakePair(layer, head);
  ++m_attentionFetches;
  Connection* connection = m_connection;
  QMetaObject::invokeMethod(
      connection, [connection, tag, request] { connection->analyze(tag, request); },
      Qt::QueuedConnection);
}

void MainWindow::onAttentionEvent(const v1::AnalyzeEvent& event) {
  if (event.has_tokens()) {
    // The fetch must see exactly the prompt shown.
    const QVector<qint64> ids(event.tokens().ids().begin(), event.tokens().ids().end());
    if (ids != m_shownIds) {
      m_promptView->setNote(tr("The server tokenized the prompt differently for the head "
                               "fetch (%1 ids, shown %2): not showing its weights.")
                                .arg(ids.size())
                                .arg(m_shownIds.size()),
                            true);
      cancelCall(m_attentionTag);
    }
    return;
  }
  if (!event.has_attention()) return;
  QString error;
  if (!m_analysis->addFetchedAttention(event.attention(), &error)) {
    m_promptView->setNote(tr("Head weights: %1").arg(error), true);
    cancelCall(m_attentionTag);
  }
}

}  // namespace attnscope::dashboard
