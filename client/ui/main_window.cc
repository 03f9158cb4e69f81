#include "client/ui/main_window.h"

#include <QCloseEvent>
#include <QGroupBox>
#include <QScreen>
#include <QSettings>
#include <QSplitter>
#include <QStatusBar>
#include <QTabWidget>
#include <QTimer>
#include <QVBoxLayout>

#include "client/ui/connection_indicator.h"
#include "client/ui/eviction_view.h"
#include "client/ui/lens_view.h"
#include "client/ui/patch_view.h"
#include "client/ui/feed_panel.h"
#include "client/ui/prompt_view.h"
#include "client/ui/trend_chart.h"

namespace attnscope::dashboard {
namespace {

namespace v1 = attnscope::v1;

constexpr int kMaxRememberedPrompts = 100;

constexpr int kStatusMessageMs = 8000;

// 1600 x 1000, or the screen's available area less room for the window's
// frame where that is smaller (a 1366 x 768 laptop).
QSize defaultWindowSize(const QScreen* screen) {
  const QSize wanted(1600, 1000);
  if (screen == nullptr) return wanted;
  const QSize room = screen->availableGeometry().size() - QSize(16, 48);
  return wanted.boundedTo(room.expandedTo(QSize(640, 480)));
}

QGroupBox* framed(const QString& title, QWidget* content) {
  auto* box = new QGroupBox(title);
  auto* layout = new QVBoxLayout(box);
  layout->setContentsMargins(6, 6, 6, 6);
  layout->addWidget(content);
  return box;
}

// The security settings last used: file paths only.
ConnectionSecurity storedSecurity() {
  QSettings settings;
  ConnectionSecurity security;
  security.caFile = settings.value(QStringLiteral("server/tlsCaFile")).toString();
  security.certFile = settings.value(QStringLiteral("server/tlsCertFile")).toString();
  security.keyFile = settings.value(QStringLiteral("server/tlsKeyFile")).toString();
  security.tokenFile = settings.value(QStringLiteral("server/tokenFile")).toString();
  return security;
}

void storeSecurity(const ConnectionSecurity& security) {
  QSettings settings;
  settings.setValue(QStringLiteral("server/tlsCaFile"), security.caFile);
  settings.setValue(QStringLiteral("server/tlsCertFile"), security.certFile);
  settings.setValue(QStringLiteral("server/tlsKeyFile"), security.keyFile);
  settings.setValue(QStringLiteral("server/tokenFile"), security.tokenFile);
}

ConnectionOptions withStoredSecurity(ConnectionOptions options) {
  if (options.security == ConnectionSecurity()) options.security = storedSecurity();
  return options;
}

}  // namespace

MainWindow::MainWindow(const QString& server, ConnectionOptions options, QWidget* parent)
    : QMainWindow(parent),
      m_connection(new Connection(withStoredSecurity(options))),
      m_feed(new FeedModel(this)),
      m_analysis(new PromptAnalysis(this)),
      m_controller(new DashboardController(this)) {
  setObjectName(QStringLiteral("mainWindow"));
  setWindowTitle(tr("attnscope dashboard"));
  m_connectionThread.setObjectName(QStringLiteral("attnscope-connection"));
  m_connection->moveToThread(&m_connectionThread);
  connect(&m_connectionThread, &QThread::finished, m_connection, &QObject::deleteLater);
  m_connectionThread.start();
  buildLayout();
  buildActions();
  wireConnection();
  wireController();
  restoreSettings();
  // Given explicitly (the command line, a test): remembered like a choice
  // made in Settings.
  if (options.security != ConnectionSecurity()) storeSecurity(options.security);
  m_security = withStoredSecurity(options).security;
  const QString last = QSettings().value(QStringLiteral("server/address")).toString();
  setServerAddress(!server.isEmpty() ? server
                   : !last.isEmpty() ? last
                                     : QString::fromLatin1(kDefaultServer));
}

MainWindow::~MainWindow() { shutdownConnection(); }

void MainWindow::shutdownConnection() {
  if (m_shutDown) return;
  m_shutDown = true;
  Connection* connection = m_connection;
  QMetaObject::invokeMethod(
      connection, [connection] { connection->shutdown(); }, Qt::BlockingQueuedConnection);
  m_connectionThread.quit();
  m_connectionThread.wait();
}

void MainWindow::closeEvent(QCloseEvent* event) {
  saveSettings();
  QMainWindow::closeEvent(event);
}

void MainWindow::showEvent(QShowEvent* event) {
  QMainWindow::showEvent(event);
  if (!m_splittersRestored) {
    m_splittersRestored = true;
    // The feed wants room for prompt text; saved states override this.
    const int left = width() * 2 / 5;
    m_mainSplitter->setSizes({left, width() - left});
    restoreSplitters();
  }
}

void MainWindow::buildLayout() {
  m_feedPanel = new FeedPanel(m_feed);
  m_sendPanel = new SendPanel;
  m_promptView = new PromptView;
  m_promptView->setAnalysis(m_analysis);
  m_evictionView = new EvictionView;
  // The right-hand side shows a prompt's analysis or an eviction run; the
  // tab follows what was sent or picked, and either can be looked at.
  m_detailTabs = new QTabWidget;
  m_detailTabs->setObjectName(QStringLiteral("detailTabs"));
  m_detailTabs->setDocumentMode(true);
  m_detailTabs->addTab(m_promptView, tr("Prompt"));
  m_detailTabs->addTab(m_evictionView, tr("Eviction run"));
  m_lensView = new LensView;
  m_patchView = new PatchView;
  m_detailTabs->addTab(m_lensView, tr("Lens"));
  m_detailTabs->addTab(m_patchView, tr("Patching"));
  m_evictionRedraw = new QTimer(this);
  m_evictionRedraw->setSingleShot(true);
  m_evictionRedraw->setInterval(100);
  connect(m_evictionRedraw, &QTimer::timeout, this, [this] {
    redrawEviction();
    if (m_controller->evictionRunning()) m_sendPanel->setStatus(evictionProgressText());
  });
  m_trendChart = new TrendChart;
  m_leftSplitter = new QSplitter(Qt::Vertical);
  m_leftSplitter->setObjectName(QStringLiteral("leftSplitter"));
  m_leftSplitter->addWidget(framed(tr("Live feed"), m_feedPanel));
  m_leftSplitter->addWidget(m_trendChart);
  m_leftSplitter->addWidget(framed(tr("Send a prompt"), m_sendPanel));
  m_leftSplitter->setStretchFactor(0, 3);
  m_leftSplitter->setStretchFactor(1, 1);
  m_leftSplitter->setStretchFactor(2, 0);
  m_mainSplitter = new QSplitter(Qt::Horizontal);
  m_mainSplitter->setObjectName(QStringLiteral("mainSplitter"));
  m_mainSplitter->addWidget(m_leftSplitter);
  m_mainSplitter->addWidget(m_detailTabs);
  m_mainSplitter->setStretchFactor(0, 2);
  m_mainSplitter->setStretchFactor(1, 3);
  setCentralWidget(m_mainSplitter);
  m_indicator = new ConnectionIndicator;
  statusBar()->addPermanentWidget(m_indicator);
  resize(defaultWindowSize(screen()));
  connect(m_feedPanel, &FeedPanel::requestSelected, this, &MainWindow::onRequestSelected);
  connect(m_feed, &FeedModel::modelSeen, m_feedPanel, &FeedPanel::addModelName);
  connect(m_feed, &FeedModel::droppedEventsChanged, m_feedPanel, &FeedPanel::setDropped);
  connect(m_sendPanel, &SendPanel::sendRequested, this, &MainWindow::onSend);
  connect(m_feed, &FeedModel::requestFinished, this, &MainWindow::onFeedRequestFinished);
  connect(m_promptView, &PromptView::headShown, this, &MainWindow::onHeadShown);
}

void MainWindow::wireConnection() {
  connect(m_connection, &Connection::stateChanged, this, &MainWindow::onStateChanged);
  connect(m_connection, &Connection::subscribed, this, &MainWindow::onSubscribed);
  connect(m_connection, &Connection::replicasResolved, this, &MainWindow::onReplicasResolved);
  connect(m_connection, &Connection::replicaStateChanged, m_indicator,
          &ConnectionIndicator::setReplicaState);
  connect(m_connection, &Connection::feedEvent, this, &MainWindow::onFeedEvent);
  connect(m_connection, &Connection::modelsListed, m_sendPanel, &SendPanel::setModels);
  connect(m_connection, &Connection::modelsListed, this,
          [this](const v1::ListModelsResponse& models) {
            for (const v1::ModelInfo& info : models.models())
              m_feedPanel->addModelName(QString::fromStdString(info.name()));
          });
  connect(m_connection, &Connection::analyzeEvent, this, &MainWindow::onAnalyzeEvent);
  connect(m_connection, &Connection::analyzeFinished, this, &MainWindow::onAnalyzeFinished);
  connect(m_connection, &Connection::generateEvent, this, &MainWindow::onGenerateEvent);
  connect(m_connection, &Connection::generateFinished, this, &MainWindow::onGenerateFinished);
  connect(m_connection, &Connection::evictionEvent, this, &MainWindow::onEvictionEvent);
  connect(m_connection, &Connection::evictionFinished, this, &MainWindow::onEvictionFinished);
  wireLens();
}

void MainWindow::setServerAddress(const QString& address) {
  m_server = address.trimmed();
  QSettings().setValue(QStringLiteral("server/address"), m_server);
  setWindowTitle(tr("attnscope dashboard — %1").arg(m_server));
  Connection* connection = m_connection;
  const QString server = m_server;
  QMetaObject::invokeMethod(
      connection, [connection, server] { connection->connectTo(server); }, Qt::QueuedConnection);
}

void MainWindow::setSecurity(const ConnectionSecurity& security) {
  m_security = security;
  storeSecurity(security);
  Connection* connection = m_connection;
  const QString server = m_server;
  QMetaObject::invokeMethod(
      connection,
      [connection, server, security] {
        connection->setSecurity(security);
        connection->connectTo(server);
      },
      Qt::QueuedConnection);
}

void MainWindow::onStateChanged(Connection::State state, const QString& detail) {
  m_state = state;
  m_indicator->setState(state, detail);
}

void MainWindow::onSubscribed(int subscription, const QString& replica) {
  m_subscriptions = subscription;
  m_feed->beginSession(replica);
  if (++m_replicaSubscriptions[replica] > 1) {
    statusBar()->showMessage(m_replicas.size() > 1
                                 ? tr("Feed of %1 resumed after reconnecting").arg(replica)
                                 : tr("Feed resumed after reconnecting"),
                             kStatusMessageMs);
  }
}

void MainWindow::onReplicasResolved(const QStringList& replicas) {
  // A replica that left the target (scaled down) will not finish what it ran.
  for (const QString& gone : m_replicas) {
    if (!replicas.contains(gone)) m_feed->beginSession(gone);
  }
  m_replicas = replicas;
  m_indicator->setReplicas(replicas);
  m_feedPanel->setReplicas(replicas);
}

void MainWindow::onFeedEvent(const v1::FeedEvent& event, const QString& replica) {
  QString error;
  if (!m_feed->apply(replica, event, &error))
    statusBar()->showMessage(tr("Feed: %1").arg(error), kStatusMessageMs);
}

QString MainWindow::fullPromptFor(const FeedRow& row) const {
  // The feed carries only the first 80 characters; a prompt sent from here
  // is known in full.
  for (const QString& sent : m_sentPrompts) {
    if (sent.startsWith(row.promptPreview)) return sent;
  }
  return row.promptPreview;
}

void MainWindow::onRequestSelected(const FeedRow& row) {
  if (row.isEviction()) {
    showEvictionRow(row);
    return;
  }
  showPromptTab();
  m_controller->beginShowing();
  if (row.rpc == QLatin1String("Generate")) m_controller->setFeedTokens(row.tokens, row.promptTokens);
  const QString text = row.promptPreview.isEmpty() ? QString() : fullPromptFor(row);
  if (row.state == FeedRow::State::Running) {
    m_controller->leaveShown();
    m_analysis->reset(text, row.model);
    m_controller->waitFor(row.session, row.requestId);
    m_promptView->setNote(tr("Still running: shown when it finishes."));
    return;
  }
  if (row.state != FeedRow::State::Finished) {
    m_controller->leaveShown();
    m_analysis->reset(text, row.model);
    m_analysis->markFailed(row.state == FeedRow::State::Lost
                               ? tr("the connection was lost before it finished")
                               : QStringLiteral("%1: %2").arg(row.status, row.errorMessage));
    return;
  }
  if (row.hasDetail()) {
    showFeedDetail(row);
    return;
  }
  if (row.promptIds.isEmpty()) {
    m_promptView->setNote(tr("The server never tokenized this prompt: nothing to show."), true);
    return;
  }
  // A generation (or a row too old to keep its details): the dashboard
  // analyzes its exact token ids itself, with the row's options.
  startAnalysis(row.model, PromptInput{text, row.promptIds, {}}, row.options,
                v1::REQUEST_ORIGIN_DASHBOARD, false);
}

void MainWindow::onFeedRequestFinished(int index) {
  const FeedRow* row = m_feed->rowAt(index);
  if (row == nullptr) return;
  if (m_trends.add(*row)) m_trendChart->setTrends(m_trends.points());
  if (m_feedPanel->isFollowing()) {
    m_feedPanel->onRequestFinished(index);
  } else if (m_controller->isWaitingFor(row->session, row->requestId)) {
    onRequestSelected(*row);
  }
}

void MainWindow::onSend(const SendRequest& request) {
  if (request.evaluateEviction) {
    evaluateEviction(request.text, request.model, request.policies, request.positions,
                     request.ids);
    return;
  }
  if (request.generate) {
    generateFromPrompt(request.text, request.model, request.maxNewTokens, request.ids,
                       request.chat);
  } else if (!request.chat.isEmpty()) {
    analyzeChat(request.chat, request.model);
  } else {
    analyzePrompt(request.text, request.model, request.ids);
  }
}

void MainWindow::analyzeChat(const ChatInput& chat, const QString& model) {
  showPromptTab();
  m_controller->beginShowing();
  startAnalysis(model, PromptInput{chatPreview(chat.messages), {}, chat}, v1::AnalyzeOptions(),
                v1::REQUEST_ORIGIN_UNSPECIFIED, true);
}

void MainWindow::analyzePrompt(const QString& text, const QString& model,
                               const QVector<qint64>& ids) {
  showPromptTab();
  m_controller->beginShowing();
  if (ids.isEmpty()) rememberSent(text);
  startAnalysis(model, PromptInput{ids.isEmpty() ? text : QString(), ids, {}},
                v1::AnalyzeOptions(), v1::REQUEST_ORIGIN_UNSPECIFIED, true);
}

void MainWindow::generateFromPrompt(const QString& text, const QString& model, int maxNewTokens,
                                    const QVector<qint64>& ids, const ChatInput& chat) {
  showPromptTab();
  m_controller->beginShowing();
  const bool isChat = ids.isEmpty() && !chat.isEmpty();
  if (ids.isEmpty() && !isChat) rememberSent(text);
  const PromptInput input{isChat ? chatPreview(chat.messages) : ids.isEmpty() ? text : QString(),
                          ids, isChat ? chat : ChatInput()};
  // The prompt's own analysis is the dashboard's (the user asked to
  // generate), but its progress and errors go to the send panel.
  startAnalysis(model, input, v1::AnalyzeOptions(), v1::REQUEST_ORIGIN_DASHBOARD, true);
  m_controller->generate(model, PromptInput{text, ids, isChat ? chat : ChatInput()},
                         maxNewTokens);
}

void MainWindow::reanalyze() {
  if (!m_analysis->hasTokens() && m_analysis->promptText().isEmpty()) return;
  showPromptTab();
  // A chat again as a chat: as ids it would lose its template's structure.
  const ChatInput chat = m_controller->shownChat();
  const QVector<qint64> ids = chat.isEmpty() ? m_controller->shownIds() : QVector<qint64>();
  startAnalysis(m_analysis->model(), PromptInput{m_analysis->promptText(), ids, chat},
                m_controller->shownOptions(), v1::REQUEST_ORIGIN_UNSPECIFIED, true);
}

void MainWindow::rememberSent(const QString& text) {
  m_sentPrompts.removeAll(text);
  m_sentPrompts.prepend(text);
  while (m_sentPrompts.size() > kMaxRememberedPrompts) m_sentPrompts.removeLast();
}

void MainWindow::startAnalysis(const QString& model, const PromptInput& input,
                               const v1::AnalyzeOptions& options, v1::RequestOrigin origin,
                               bool usersSend) {
  m_analysis->reset(input.text.isEmpty() && !input.ids.isEmpty()
                        ? tr("(%n token ids)", "", input.ids.size())
                        : input.text,
                    model);
  m_entropy.clear();
  m_controller->analyze(model, input, options, origin, usersSend);
}

void MainWindow::wireController() {
  Connection* connection = m_connection;
  // Each request the controller builds goes to the connection's thread.
  auto forward = [this, connection](auto signal, auto call) {
    connect(m_controller, signal, this, [connection, call](quint64 tag, const auto& request) {
      QMetaObject::invokeMethod(
          connection, [connection, call, tag, request] { (connection->*call)(tag, request); },
          Qt::QueuedConnection);
    });
  };
  forward(&DashboardController::analyzeRequested, &Connection::analyze);
  forward(&DashboardController::generateRequested, &Connection::generate);
  forward(&DashboardController::evictionRequested, &Connection::evaluateEviction);
  forward(&DashboardController::lensRequested, &Connection::lens);
  forward(&DashboardController::patchRequested, &Connection::patch);
  connect(m_controller, &DashboardController::cancelRequested, this, [connection](quint64 tag) {
    QMetaObject::invokeMethod(
        connection, [connection, tag] { connection->cancel(tag); }, Qt::QueuedConnection);
  });
}

void MainWindow::onAnalyzeEvent(quint64 tag, const v1::AnalyzeEvent& event) {
  const DashboardController::Call call = m_controller->callOf(tag);
  if (call == DashboardController::Call::Attention) {
    onAttentionEvent(event);
    return;
  }
  if (call != DashboardController::Call::Analyze) return;  // the user has moved on
  m_analysis->addEvent(event);
  if (event.has_tokens()) {
    m_controller->setShownIds(
        QVector<qint64>(event.tokens().ids().begin(), event.tokens().ids().end()));
    if (m_controller->analysisOwnsStatus())
      m_sendPanel->setStatus(tr("analyzing %n token(s)…", "", event.tokens().ids_size()));
  }
  if (event.has_summary()) {
    rebuildEntropy();
    if (m_controller->analysisOwnsStatus()) {
      const QString done = tr("done: %n token(s), health %1", "", m_analysis->tokenCount())
                               .arg(event.summary().health(), 0, 'f', 1);
      m_sendPanel->setStatus(m_controller->generationRunning() ? done + tr("; generating…")
                                                                : done);
    }
    onHeadShown(m_promptView->heatmapModel()->layer(), m_promptView->heatmapModel()->head());
  }
}

void MainWindow::onAnalyzeFinished(quint64 tag, bool ok, const QString& error) {
  const DashboardController::Call call = m_controller->callOf(tag);
  if (call == DashboardController::Call::Attention) {
    m_controller->finished(tag);
    if (!ok && !error.startsWith(QLatin1String("CANCELLED"))) {
      m_promptView->setNote(tr("Fetching head L%1 H%2 failed: %3")
                                .arg(m_controller->fetchedHead().first)
                                .arg(m_controller->fetchedHead().second)
                                .arg(error),
                            true);
    }
    return;
  }
  if (call != DashboardController::Call::Analyze || ok) return;
  m_analysis->markFailed(error);
  m_promptView->setNote(tr("Analyze failed: %1").arg(error), true);
  if (m_controller->analyzeIsUsers())
    m_sendPanel->setStatus(tr("Analyze failed: %1").arg(error), true);
}

void MainWindow::onGenerateEvent(quint64 tag, const v1::GenerateEvent& event) {
  if (m_controller->callOf(tag) != DashboardController::Call::Generate) return;
  QString error;
  if (!m_controller->generation().addEvent(event, &error)) {
    m_promptView->setNote(tr("Generate: %1").arg(error), true);
    return;
  }
  m_promptView->setNote(tr("Generated: %1").arg(m_controller->generation().text()));
  if (event.has_token()) rebuildEntropy();
}

void MainWindow::onGenerateFinished(quint64 tag, bool ok, const QString& error) {
  if (m_controller->callOf(tag) != DashboardController::Call::Generate) return;
  m_controller->finished(tag);
  if (ok) {
    m_sendPanel->setStatus(
        tr("generated %n token(s)", "", m_controller->generation().tokens().size()));
    return;
  }
  m_promptView->setNote(tr("Generate failed: %1").arg(error), true);
  m_sendPanel->setStatus(tr("Generate failed: %1").arg(error), true);
}

void MainWindow::rebuildEntropy() {
  m_entropy = m_controller->entropy(*m_analysis);
  m_promptView->setEntropy(m_entropy);
}

}  // namespace attnscope::dashboard
