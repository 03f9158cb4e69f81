// The dashboard's state without widgets: which prompt is shown (its exact
// token ids, chat, model and options), which calls are current and their
// tags, and every request built once (Analyze for a prompt or one head's
// attention, Generate, EvaluateEviction). MainWindow lays out and wires: it
// sends what this asks for (the *Requested signals) and routes each reply by
// callOf(tag); tests drive it with no display and no server.
#pragma once

#include <QObject>
#include <QPair>
#include <QStringList>
#include <QVector>

#include "attnscope/v1/attnscope.pb.h"
#include "client/models/chat_input.h"
#include "client/models/entropy_series.h"
#include "client/models/feed_model.h"
#include "client/models/generation_trace.h"
#include "client/models/prompt_analysis.h"

namespace attnscope::dashboard {

// What is sent: text, else token ids, else a conversation (the first given
// of ids and chat wins over text).
struct PromptInput {
  QString text;
  QVector<qint64> ids;
  ChatInput chat;
};

// The requests the dashboard sends, built in one place.
// Analyze of a prompt: its options without attention (heads are fetched one
// at a time, on demand).
attnscope::v1::AnalyzeRequest analyzeRequest(const QString& model, const PromptInput& input,
                                             const attnscope::v1::AnalyzeOptions& options,
                                             attnscope::v1::RequestOrigin origin);
// One head's float32 weights over exactly `ids`, with the shown prompt's
// options, as the dashboard's own request (origin DASHBOARD).
attnscope::v1::AnalyzeRequest attentionRequest(const QString& model, const QVector<qint64>& ids,
                                               const attnscope::v1::AnalyzeOptions& options,
                                               int layer, int head);
attnscope::v1::GenerateRequest generateRequest(const QString& model, const PromptInput& input,
                                               int maxNewTokens);
// Text or ids (a conversation is not accepted by EvaluateEviction), with the
// cache's kept positions. positions: "", "cache" or "original".
attnscope::v1::EvaluateEvictionRequest evictionRequest(const QString& model,
                                                       const PromptInput& input,
                                                       const QStringList& policies,
                                                       const QString& positions);

// The logit lens (top 3 per cell) and direct logit attribution at the last
// position of exactly `ids`, with the shown prompt's precision: every
// position up to kLensColumns tokens, else the last kLensColumns.
constexpr int kLensColumns = 256;
attnscope::v1::LensRequest lensRequest(const QString& model, const QVector<qint64>& ids,
                                       const attnscope::v1::AnalyzeOptions& options);
// Activation patching from the clean prompt into the corrupted one (text,
// or token ids when given): each head's output, or the residual stream.
// The metric's targets as one token's text each; empty: the clean and the
// corrupted run's top predictions.
struct PatchInput {
  PromptInput clean;
  PromptInput corrupted;
  QString targetA;
  QString targetB;
  bool residual = false;
};
attnscope::v1::PatchRequest patchRequest(const QString& model, const PatchInput& input);

class DashboardController : public QObject {
  Q_OBJECT

 public:
  enum class Call { None, Analyze, Attention, Generate, Eviction, Lens, Patch };

  explicit DashboardController(QObject* parent = nullptr);

  // Which current call `tag` is (None: a call the user has moved on from,
  // or tag 0).
  Call callOf(quint64 tag) const;

  // Analyzes a prompt and shows it: the dashboard's previous analysis and
  // head fetch are cancelled (a user's send runs on: it is in the feed).
  // usersSend: its progress and errors go to the send panel. Returns its tag.
  quint64 analyze(const QString& model, const PromptInput& input,
                  const attnscope::v1::AnalyzeOptions& options,
                  attnscope::v1::RequestOrigin origin, bool usersSend);
  // Generates after the prompt (the analysis is started separately).
  quint64 generate(const QString& model, const PromptInput& input, int maxNewTokens);
  // Fetches one head of the shown prompt unless that fetch is running or
  // nothing is shown (returns 0 then).
  quint64 fetchHead(int layer, int head);
  quint64 evaluateEviction(const QString& model, const PromptInput& input,
                           const QStringList& policies, const QString& positions);

  // The logit lens and attribution of the shown prompt (0 when nothing is
  // shown), and a patching run; each cancels its own previous run (neither
  // is on the feed: a run the user moved on from is of no use).
  quint64 lens();
  quint64 patch(const QString& model, const PatchInput& input);
  bool lensRunning() const { return m_lensTag != 0; }
  bool patchRunning() const { return m_patchTag != 0; }

  // A new prompt is about to be shown: no generation, generated feed tokens
  // or waiting row belong to it any more (the reset the send and select
  // slots share).
  void beginShowing();
  // The generation streaming after the shown prompt, and the generated
  // tokens a selected Generate feed row carried (after promptTokens).
  GenerationTrace& generation() { return m_generation; }
  const GenerationTrace& generation() const { return m_generation; }
  void setFeedTokens(const QVector<FeedToken>& tokens, int promptTokens);
  // Next-token entropy over the shown prompt (from its summary, when it
  // covers every token) then the generated tokens.
  EntropySeries entropy(const PromptAnalysis& analysis) const;
  // Stops the prompt view's own requests (its analysis unless a user's send,
  // its head fetch).
  void leaveShown();
  void cancel(quint64 tag);
  // Cancels the running head fetch, if any (a tokenization that differs
  // from the shown prompt, weights that do not parse).
  void cancelHeadFetch() { cancel(m_attentionTag); }
  // A call ended (its finished signal): it is no longer current.
  void finished(quint64 tag);

  // The prompt shown, for head fetches and F5.
  void setShown(const QString& model, const QVector<qint64>& ids, const ChatInput& chat,
                const attnscope::v1::AnalyzeOptions& options);
  void setShownIds(const QVector<qint64>& ids) { m_shownIds = ids; }
  const QVector<qint64>& shownIds() const { return m_shownIds; }
  const ChatInput& shownChat() const { return m_shownChat; }
  const QString& shownModel() const { return m_shownModel; }
  const attnscope::v1::AnalyzeOptions& shownOptions() const { return m_shownOptions; }

  bool analyzeIsUsers() const { return m_analyzeIsUsers; }
  // The shown prompt was sent to generate from, and that generation is
  // still running (its analysis and its generation end in either order).
  bool generationRunning() const { return m_generateTag != 0 && !m_generateEnded; }
  bool generationEnded() const { return m_generateTag != 0 && m_generateEnded; }
  // The user's analysis may write the send panel's status (its tokens, its
  // summary): not once the generation sent with it has ended, whose
  // "generated" line stays whichever of the analysis's events come later.
  bool analysisOwnsStatus() const { return m_analyzeIsUsers && !generationEnded(); }
  // The user's EvaluateEviction send is running.
  bool evictionRunning() const { return m_evictionTag != 0; }
  QPair<int, int> fetchedHead() const { return m_attentionHead; }
  int headFetches() const { return m_headFetches; }

  // A running feed row selected: shown when it finishes.
  void waitFor(quint64 session, quint64 requestId);
  bool isWaitingFor(quint64 session, quint64 requestId) const;
  void stopWaiting() { waitFor(0, 0); }

 Q_SIGNALS:
  void analyzeRequested(quint64 tag, const attnscope::v1::AnalyzeRequest& request);
  void generateRequested(quint64 tag, const attnscope::v1::GenerateRequest& request);
  void evictionRequested(quint64 tag, const attnscope::v1::EvaluateEvictionRequest& request);
  void lensRequested(quint64 tag, const attnscope::v1::LensRequest& request);
  void patchRequested(quint64 tag, const attnscope::v1::PatchRequest& request);
  void cancelRequested(quint64 tag);

 private:
  quint64 m_nextTag = 0;
  quint64 m_analyzeTag = 0;
  bool m_analyzeIsUsers = false;
  quint64 m_generateTag = 0;
  bool m_generateEnded = false;
  quint64 m_attentionTag = 0;
  quint64 m_evictionTag = 0;
  quint64 m_lensTag = 0;
  quint64 m_patchTag = 0;
  QPair<int, int> m_attentionHead{-1, -1};
  int m_headFetches = 0;
  QVector<qint64> m_shownIds;
  ChatInput m_shownChat;
  QString m_shownModel;
  attnscope::v1::AnalyzeOptions m_shownOptions;
  quint64 m_waitingSession = 0;
  quint64 m_waitingRequestId = 0;
  GenerationTrace m_generation;
  QVector<FeedToken> m_feedTokens;
  int m_feedPromptTokens = 0;
};

}  // namespace attnscope::dashboard
