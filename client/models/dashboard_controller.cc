#include "client/models/dashboard_controller.h"

namespace attnscope::dashboard {
namespace {

namespace v1 = attnscope::v1;

void setChat(const ChatInput& chat, v1::Conversation* conversation) {
  for (const ChatMessageInput& m : chat.messages) {
    v1::ChatMessage* message = conversation->add_messages();
    message->set_role(m.role.toStdString());
    message->set_content(m.content.toStdString());
  }
  conversation->set_add_generation_prompt(chat.addGenerationPrompt);
  conversation->set_template_kwargs_json(chat.templateKwargs.toStdString());
}

template <typename Request>
void setIds(const QVector<qint64>& ids, Request* request) {
  for (const qint64 id : ids) request->mutable_ids()->add_ids(id);
}

// Ids, else a chat, else the text: the one prompt field every request sets.
template <typename Request>
void setPrompt(const PromptInput& input, Request* request) {
  if (!input.ids.isEmpty()) {
    setIds(input.ids, request);
  } else if (!input.chat.isEmpty()) {
    setChat(input.chat, request->mutable_chat());
  } else {
    request->set_text(input.text.toStdString());
  }
}

}  // namespace

v1::AnalyzeRequest analyzeRequest(const QString& model, const PromptInput& input,
                                  const v1::AnalyzeOptions& options, v1::RequestOrigin origin) {
  v1::AnalyzeRequest request;
  request.set_model(model.toStdString());
  setPrompt(input, &request);
  *request.mutable_options() = options;
  request.mutable_options()->set_return_attention(false);
  request.mutable_options()->clear_attention_layers();
  request.mutable_options()->clear_attention_heads();
  request.set_origin(origin);
  return request;
}

v1::AnalyzeRequest attentionRequest(const QString& model, const QVector<qint64>& ids,
                                    const v1::AnalyzeOptions& options, int layer, int head) {
  v1::AnalyzeRequest request;
  request.set_model(model.toStdString());
  setIds(ids, &request);
  v1::AnalyzeOptions* o = request.mutable_options();
  *o = options;  // the row's own options (threshold, template, blocks)
  o->set_return_attention(true);
  o->clear_attention_layers();
  o->clear_attention_heads();
  o->add_attention_layers(layer);
  o->add_attention_heads(head);
  o->set_attention_dtype(v1::TENSOR_DTYPE_FLOAT32);
  o->set_hidden_state_norms(false);
  request.set_origin(v1::REQUEST_ORIGIN_DASHBOARD);
  return request;
}

v1::GenerateRequest generateRequest(const QString& model, const PromptInput& input,
                                    int maxNewTokens) {
  v1::GenerateRequest request;
  request.set_model(model.toStdString());
  setPrompt(input, &request);
  request.set_max_new_tokens(maxNewTokens);
  return request;
}

v1::EvaluateEvictionRequest evictionRequest(const QString& model, const PromptInput& input,
                                            const QStringList& policies,
                                            const QString& positions) {
  v1::EvaluateEvictionRequest request;
  request.set_model(model.toStdString());
  if (!input.ids.isEmpty()) {
    setIds(input.ids, &request);
  } else {
    request.set_text(input.text.toStdString());
  }
  for (const QString& policy : policies) request.add_policies(policy.toStdString());
  request.set_positions(positions.toStdString());
  request.set_include_kept_positions(true);  // the kept-positions picture
  return request;
}

v1::LensRequest lensRequest(const QString& model, const QVector<qint64>& ids,
                            const v1::AnalyzeOptions& options) {
  v1::LensRequest request;
  request.set_model(model.toStdString());
  for (const qint64 id : ids) request.mutable_ids()->add_ids(id);
  request.set_logit_lens(true);
  request.set_attribution(true);
  const qint64 n = ids.size();
  request.set_lens_positions(n <= kLensColumns
                                 ? std::string("all")
                                 : QStringLiteral("%1-%2").arg(n - kLensColumns).arg(n - 1).toStdString());
  request.set_top_k(3);
  request.set_attribution_positions("last");
  request.set_precision(options.precision());
  return request;
}

v1::PatchRequest patchRequest(const QString& model, const PatchInput& input) {
  v1::PatchRequest request;
  request.set_model(model.toStdString());
  if (!input.clean.ids.isEmpty()) {
    for (const qint64 id : input.clean.ids) request.mutable_clean_ids()->add_ids(id);
  } else {
    request.set_clean_text(input.clean.text.toStdString());
  }
  if (!input.corrupted.ids.isEmpty()) {
    for (const qint64 id : input.corrupted.ids) request.mutable_corrupted_ids()->add_ids(id);
  } else {
    request.set_corrupted_text(input.corrupted.text.toStdString());
  }
  if (!input.targetA.isEmpty()) request.set_target_a_text(input.targetA.toStdString());
  if (!input.targetB.isEmpty()) request.set_target_b_text(input.targetB.toStdString());
  request.set_kind(input.residual ? v1::PATCH_KIND_RESIDUAL : v1::PATCH_KIND_HEADS);
  return request;
}

DashboardController::DashboardController(QObject* parent) : QObject(parent) {}

DashboardController::Call DashboardController::callOf(quint64 tag) const {
  if (tag == 0) return Call::None;
  if (tag == m_attentionTag) return Call::Attention;
  if (tag == m_analyzeTag) return Call::Analyze;
  if (tag == m_generateTag) return Call::Generate;
  if (tag == m_evictionTag) return Call::Eviction;
  if (tag == m_lensTag) return Call::Lens;
  if (tag == m_patchTag) return Call::Patch;
  return Call::None;
}

void DashboardController::cancel(quint64 tag) {
  if (tag == 0) return;
  if (tag == m_attentionTag) m_attentionTag = 0;
  if (tag == m_lensTag) m_lensTag = 0;
  if (tag == m_patchTag) m_patchTag = 0;
  Q_EMIT cancelRequested(tag);
}

void DashboardController::finished(quint64 tag) {
  if (tag == 0) return;
  if (tag == m_attentionTag) m_attentionTag = 0;
  if (tag == m_evictionTag) m_evictionTag = 0;
  if (tag == m_lensTag) m_lensTag = 0;
  if (tag == m_patchTag) m_patchTag = 0;
  if (tag == m_generateTag) m_generateEnded = true;
}

void DashboardController::leaveShown() {
  if (!m_analyzeIsUsers) cancel(m_analyzeTag);
  cancel(m_attentionTag);
  m_analyzeTag = 0;
  m_analyzeIsUsers = false;
}

void DashboardController::beginShowing() {
  m_generateTag = 0;
  m_generateEnded = false;
  m_generation.clear();
  m_feedTokens.clear();
  m_feedPromptTokens = 0;
  m_waitingRequestId = 0;
}

void DashboardController::setFeedTokens(const QVector<FeedToken>& tokens, int promptTokens) {
  m_feedTokens = tokens;
  m_feedPromptTokens = promptTokens;
}

quint64 DashboardController::analyze(const QString& model, const PromptInput& input,
                                     const v1::AnalyzeOptions& options, v1::RequestOrigin origin,
                                     bool usersSend) {
  leaveShown();
  const quint64 tag = ++m_nextTag;
  m_analyzeTag = tag;
  m_analyzeIsUsers = usersSend;
  setShown(model, input.ids, input.ids.isEmpty() ? input.chat : ChatInput(), options);
  Q_EMIT analyzeRequested(tag, analyzeRequest(model, input, options, origin));
  return tag;
}

quint64 DashboardController::generate(const QString& model, const PromptInput& input,
                                      int maxNewTokens) {
  const quint64 tag = ++m_nextTag;
  m_generateTag = tag;
  m_generateEnded = false;
  Q_EMIT generateRequested(tag, generateRequest(model, input, maxNewTokens));
  return tag;
}

quint64 DashboardController::fetchHead(int layer, int head) {
  if (m_shownIds.isEmpty()) return 0;
  if (m_attentionTag != 0 && m_attentionHead == qMakePair(layer, head)) return 0;
  cancel(m_attentionTag);
  const quint64 tag = ++m_nextTag;
  m_attentionTag = tag;
  m_attentionHead = qMakePair(layer, head);
  ++m_headFetches;
  Q_EMIT analyzeRequested(tag,
                          attentionRequest(m_shownModel, m_shownIds, m_shownOptions, layer, head));
  return tag;
}

quint64 DashboardController::evaluateEviction(const QString& model, const PromptInput& input,
                                              const QStringList& policies,
                                              const QString& positions) {
  // The prompt view's own requests are no longer needed; a previous
  // eviction send runs on (it is in the feed) but is no longer drawn.
  leaveShown();
  m_waitingRequestId = 0;
  const quint64 tag = ++m_nextTag;
  m_evictionTag = tag;
  Q_EMIT evictionRequested(tag, evictionRequest(model, input, policies, positions));
  return tag;
}

quint64 DashboardController::lens() {
  if (m_shownIds.isEmpty()) return 0;
  cancel(m_lensTag);
  const quint64 tag = ++m_nextTag;
  m_lensTag = tag;
  Q_EMIT lensRequested(tag, lensRequest(m_shownModel, m_shownIds, m_shownOptions));
  return tag;
}

quint64 DashboardController::patch(const QString& model, const PatchInput& input) {
  cancel(m_patchTag);
  const quint64 tag = ++m_nextTag;
  m_patchTag = tag;
  Q_EMIT patchRequested(tag, patchRequest(model, input));
  return tag;
}

void DashboardController::setShown(const QString& model, const QVector<qint64>& ids,
                                   const ChatInput& chat, const v1::AnalyzeOptions& options) {
  m_shownModel = model;
  m_shownIds = ids;
  m_shownChat = chat;
  m_shownOptions = options;
}

void DashboardController::waitFor(quint64 session, quint64 requestId) {
  m_waitingSession = session;
  m_waitingRequestId = requestId;
}

bool DashboardController::isWaitingFor(quint64 session, quint64 requestId) const {
  return m_waitingRequestId != 0 && session == m_waitingSession &&
         requestId == m_waitingRequestId;
}

EntropySeries DashboardController::entropy(const PromptAnalysis& analysis) const {
  EntropySeries series;
  const v1::Summary* summary = analysis.summary();
  const int tokens = analysis.tokenCount();
  if (summary != nullptr && summary->next_token_entropy_normalized_size() == tokens &&
      summary->next_token_entropy_nats_size() == tokens) {
    QStringList texts;
    for (int i = 0; i < tokens; ++i) texts << analysis.token(i).text;
    series.setPrompt(texts,
                     QVector<double>(summary->next_token_entropy_normalized().begin(),
                                     summary->next_token_entropy_normalized().end()),
                     QVector<double>(summary->next_token_entropy_nats().begin(),
                                     summary->next_token_entropy_nats().end()));
  }
  // Generated tokens that do not line up with the prompt are left out.
  for (const v1::GeneratedToken& t : m_generation.tokens()) {
    series.appendGenerated(t.position(), QString::fromStdString(t.text()),
                           t.entropy_normalized(), t.entropy_nats());
  }
  for (const FeedToken& t : m_feedTokens) {
    series.appendGenerated(m_feedPromptTokens + t.index, t.text, t.entropyNormalized,
                           t.entropyNats);
  }
  return series;
}

}  // namespace attnscope::dashboard
