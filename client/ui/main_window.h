// attnscope-dashboard's main window: the live feed and the send panel on the
// left; on the right, in two tabs, the selected prompt's analysis or an
// EvaluateEviction run (perplexity curves per policy, the cache's kept
// positions); the connection state in the status bar.
#pragma once

#include <QHash>
#include <QMainWindow>
#include <QThread>

#include "client/connection/connection.h"
#include "client/models/dashboard_controller.h"
#include "client/models/entropy_series.h"
#include "client/models/eviction_run.h"
#include "client/models/feed_model.h"
#include "client/models/generation_trace.h"
#include "client/models/lens_run.h"
#include "client/models/patch_run.h"
#include "client/models/prompt_analysis.h"
#include "client/models/request_trends.h"
#include "client/ui/send_panel.h"

class QSplitter;
class QTabWidget;
class QTimer;

namespace attnscope::dashboard {

class ConnectionIndicator;
class EvictionView;
class FeedPanel;
class LensView;
class PatchView;
class PromptView;
class TrendChart;

// Owns the Connection (on a worker thread of its own) and the models; the
// GUI thread only ever posts requests to it and handles its signals.
// Selecting a finished analysis in the feed shows what the feed carried
// (tokens, layers, summary: no new analysis); the one head shown in the
// heatmap is fetched on demand with the row's own options, marked as the
// dashboard's own request (origin DASHBOARD), which the feed does not show
// and the metrics count apart. Selecting a finished EvaluateEviction row
// shows its run (EvictionRun::fromFinished) in the eviction tab; an eviction
// run sent from the send panel is drawn there live as its events arrive.
// Persists the server address, the TLS and token file paths (never the
// token), window geometry and splitter states with QSettings (organization
// "attnscope", application "dashboard").
class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  static constexpr const char* kDefaultServer = "127.0.0.1:50051";

  // server: host:port or a gRPC target of several replicas (dns:///h:p,
  // ipv4:a:p,b:p; see connection/target.h); empty: the last server used
  // (QSettings), else kDefaultServer. options.security all empty: the TLS and
  // token files last used (QSettings). Connects at once. The feed merges the
  // feeds of every replica; the Replica column shows which served a row.
  explicit MainWindow(const QString& server = QString(), ConnectionOptions options = {},
                      QWidget* parent = nullptr);
  ~MainWindow() override;

  QString serverAddress() const { return m_server; }
  ConnectionSecurity security() const { return m_security; }
  // As last reported by the connection (queued, so it lags a little).
  Connection::State connectionState() const { return m_state; }
  // Feed subscriptions so far over all replicas: 1 per replica after
  // connecting, +1 per reconnect of any.
  int subscriptions() const { return m_subscriptions; }
  // The replicas behind the target (labels), as last resolved.
  QStringList replicas() const { return m_replicas; }
  // Feed subscriptions of one replica: 1 once connected, +1 per reconnect.
  int replicaSubscriptions(const QString& replica) const {
    return m_replicaSubscriptions.value(replica);
  }

  FeedModel* feedModel() const { return m_feed; }
  PromptAnalysis* analysis() const { return m_analysis; }
  const EntropySeries& entropySeries() const { return m_entropy; }
  FeedPanel* feedPanel() const { return m_feedPanel; }
  SendPanel* sendPanel() const { return m_sendPanel; }
  PromptView* promptView() const { return m_promptView; }
  // The right-hand side: the prompt view's tab, the eviction view's, the
  // lens view's and the patching view's.
  QTabWidget* detailTabs() const { return m_detailTabs; }
  EvictionView* evictionView() const { return m_evictionView; }
  // The eviction run shown (live, or picked from the feed).
  const EvictionRun& evictionRun() const { return m_evictionRun; }
  LensView* lensView() const { return m_lensView; }
  PatchView* patchView() const { return m_patchView; }
  TrendChart* trendChart() const { return m_trendChart; }
  const RequestTrends& trends() const { return m_trends; }
  // Attention fetches this window has started (one per head shown).
  int attentionFetches() const { return m_controller->headFetches(); }
  DashboardController* controller() const { return m_controller; }
  ConnectionIndicator* connectionIndicator() const { return m_indicator; }

 public Q_SLOTS:
  // Reconnects to host:port (or a target) and remembers it.
  void setServerAddress(const QString& address);
  // Remembers the TLS and token file paths and reconnects with them.
  void setSecurity(const attnscope::dashboard::ConnectionSecurity& security);
  // Runs Analyze (a user request; token ids instead of the text when given)
  // and shows it; the heatmap's head is fetched once the summary is in.
  void analyzePrompt(const QString& text, const QString& model = QString(),
                     const QVector<qint64>& ids = {});
  // Runs Analyze on a conversation (a user request, rendered by the server
  // with the model's chat template) and shows it.
  void analyzeChat(const ChatInput& chat, const QString& model = QString());
  // Generates up to maxNewTokens after the prompt (the token ids, else the
  // chat when given), and analyzes the prompt as the dashboard's own request.
  void generateFromPrompt(const QString& text, const QString& model, int maxNewTokens,
                          const QVector<qint64>& ids = {}, const ChatInput& chat = {});
  // Runs EvaluateEviction (a user request) on the text, or the token ids
  // when given, under `policies` in order, with the cache's kept positions,
  // and draws it live in the eviction tab. positions: "", "cache" or
  // "original".
  void evaluateEviction(const QString& text, const QString& model, const QStringList& policies,
                        const QString& positions = QString(), const QVector<qint64>& ids = {});
  // The logit lens and direct logit attribution of the shown prompt, drawn
  // in the lens tab as they arrive.
  void runLens();
  // Activation patching (the send panel's model), drawn in the patching tab
  // as its passes arrive.
  void runPatch(const attnscope::dashboard::PatchInput& input);
  // F5: analyzes the shown prompt again.
  void reanalyze();
  void openSettings();
  void focusFilter();

 protected:
  void closeEvent(QCloseEvent* event) override;
  // The first show restores the splitters: before it they have no size to
  // restore into.
  void showEvent(QShowEvent* event) override;

 private:
  // main_window.cc: layout, connection, feed and analysis.
  void buildLayout();
  void wireConnection();
  void onStateChanged(Connection::State state, const QString& detail);
  void onSubscribed(int subscription, const QString& replica);
  void onReplicasResolved(const QStringList& replicas);
  void onFeedEvent(const attnscope::v1::FeedEvent& event, const QString& replica);
  void onRequestSelected(const FeedRow& row);
  void onAnalyzeEvent(quint64 tag, const attnscope::v1::AnalyzeEvent& event);
  void onAnalyzeFinished(quint64 tag, bool ok, const QString& error);
  void onGenerateEvent(quint64 tag, const attnscope::v1::GenerateEvent& event);
  void onGenerateFinished(quint64 tag, bool ok, const QString& error);
  void onSend(const SendRequest& request);
  void onFeedRequestFinished(int row);
  // Shows `input` (text, else ids, else a chat labelled by its text) and
  // analyzes it with `options` through the controller.
  void startAnalysis(const QString& model, const PromptInput& input,
                     const attnscope::v1::AnalyzeOptions& options,
                     attnscope::v1::RequestOrigin origin, bool usersSend);
  // Sends what the controller asks for to the connection's thread.
  void wireController();

  // main_window_detail.cc: what the prompt view shows, fetched on demand.
  // Shows a finished feed row from what the feed carried.
  void showFeedDetail(const FeedRow& row);
  // The heatmap shows (layer, head): fetch its weights unless present.
  void onHeadShown(int layer, int head);
  void onAttentionEvent(const attnscope::v1::AnalyzeEvent& event);
  void rebuildEntropy();
  void rememberSent(const QString& text);
  QString fullPromptFor(const FeedRow& row) const;
  void shutdownConnection();

  // main_window_eviction.cc: EvaluateEviction runs, live and from the feed.
  void onEvictionEvent(quint64 tag, const attnscope::v1::EvaluateEvictionEvent& event);
  void onEvictionFinished(quint64 tag, bool ok, const QString& error);
  // Shows an EvaluateEviction feed row in the eviction tab.
  void showEvictionRow(const FeedRow& row);
  // Redraws the eviction view from m_evictionRun (throttled while live).
  void redrawEviction();
  QString evictionProgressText() const;
  void showPromptTab();
  void showEvictionTab();

  // main_window_lens.cc: Lens and Patch runs (the dashboard's own calls,
  // not on the feed).
  void onLensEvent(quint64 tag, const attnscope::v1::LensEvent& event);
  void onLensFinished(quint64 tag, bool ok, const QString& error);
  void onPatchEvent(quint64 tag, const attnscope::v1::PatchEvent& event);
  void onPatchFinished(quint64 tag, bool ok, const QString& error);
  void wireLens();

  // main_window_actions.cc: menus, shortcuts, settings.
  void buildActions();
  void restoreSettings();
  void restoreSplitters();
  void saveSettings() const;
  QList<QSplitter*> persistedSplitters() const;
  void showShortcuts();

  QThread m_connectionThread;
  Connection* m_connection;
  FeedModel* m_feed;
  PromptAnalysis* m_analysis;
  DashboardController* m_controller;
  EntropySeries m_entropy;
  FeedPanel* m_feedPanel = nullptr;
  SendPanel* m_sendPanel = nullptr;
  PromptView* m_promptView = nullptr;
  EvictionView* m_evictionView = nullptr;
  QTabWidget* m_detailTabs = nullptr;
  ConnectionIndicator* m_indicator = nullptr;
  TrendChart* m_trendChart = nullptr;
  RequestTrends m_trends;
  QSplitter* m_mainSplitter = nullptr;
  QSplitter* m_leftSplitter = nullptr;
  QString m_server;
  ConnectionSecurity m_security;
  Connection::State m_state = Connection::State::Disconnected;
  int m_subscriptions = 0;
  QStringList m_replicas;
  QHash<QString, int> m_replicaSubscriptions;
  // Whether the eviction view shows the user's running send (false once
  // another row is picked; it runs on).
  bool m_evictionLive = false;
  EvictionRun m_liveEviction;        // the send's events so far
  QStringList m_evictionPolicies;    // what it asked for, to know its feed row
  QVector<qint64> m_evictionIds;     // its tokens (from its first event)
  QString m_evictionModel;
  EvictionRun m_evictionRun;         // the run shown
  QTimer* m_evictionRedraw = nullptr;  // single shot: batches live redraws
  LensView* m_lensView = nullptr;
  PatchView* m_patchView = nullptr;
  LensRun m_lensRun;
  PatchRun m_patchRun;
  QTimer* m_lensRedraw = nullptr;   // single shot: batches live redraws
  QTimer* m_patchRedraw = nullptr;
  QStringList m_sentPrompts;  // full texts sent from here, newest first
  bool m_shutDown = false;
  bool m_splittersRestored = false;
};

}  // namespace attnscope::dashboard
