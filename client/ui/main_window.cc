#include "client/ui/main_window.h"

#include <QCloseEvent>
#include <QGroupBox>
#include <QSettings>
#include <QSplitter>
#include <QStatusBar>
#include <QVBoxLayout>

#include "client/ui/connection_indicator.h"
#include "client/ui/feed_panel.h"
#include "client/ui/prompt_view.h"

namespace attnscope::dashboard {
namespace {

namespace v1 = attnscope::v1;

constexpr int kMaxRememberedPrompts = 100;
constexpr int kStatusMessageMs = 8000;

QGroupBox* framed(const QString& title, QWidget* content) {
  auto* box = new QGroupBox(title);
  auto* layout = new QVBoxLayout(box);
  layout->setContentsMargins(6, 6, 6, 6);
  layout->addWidget(content);
  return box;
}

}  // namespace

MainWindow::MainWindow(const QString& server, ConnectionOptions options, QWidget* parent)
    : QMainWindow(parent),
      m_connection(new Connection(options)),
      m_feed(new FeedModel(this)),
      m_analysis(new PromptAnalysis(this)) {
  setObjectName(QStringLiteral("mainWindow"));
  setWindowTitle(tr("attnscope dashboard"));
  m_connectionThread.setObjectName(QStringLiteral("attnscope-connection"));
  m_connection->moveToThread(&m_connectionThread);
  connect(&m_connectionThread, &QThread::finished, m_connection, &QObject::deleteLater);
  m_connectionThread.start();
  buildLayout();
  buildActions();
  wireConnection();
  restoreSettings();
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
  m_leftSplitter = new QSplitter(Qt::Vertical);
  m_leftSplitter->setObjectName(QStringLiteral("leftSplitter"));
  m_leftSplitter->addWidget(framed(tr("Live feed"), m_feedPanel));
  m_leftSplitter->addWidget(framed(tr("Send a prompt"), m_sendPanel));
  m_leftSplitter->setStretchFactor(0, 1);
  m_leftSplitter->setStretchFactor(1, 0);
  m_mainSplitter = new QSplitter(Qt::Horizontal);
  m_mainSplitter->setObjectName(QStringLiteral("mainSplitter"));
  m_mainSplitter->addWidget(m_leftSplitter);
  m_mainSplitter->addWidget(m_promptView);
  m_mainSplitter->setStretchFactor(0, 2);
  m_mainSplitter->setStretchFactor(1, 3);
  setCentralWidget(m_mainSplitter);
  m_indicator = new ConnectionIndicator;
  statusBar()->addPermanentWidget(m_indicator);
  resize(1600, 1000);
  connect(m_feedPanel, &FeedPanel::requestSelected, this, &MainWindow::onRequestSelected);
  connect(m_feed, &FeedModel::modelSeen, m_feedPanel, &FeedPanel::addModelName);
  connect(m_feed, &FeedModel::droppedEventsChanged, m_feedPanel, &FeedPanel::setDropped);
  connect(m_sendPanel, &SendPanel::sendRequested, this, &MainWindow::onSend);
}

void MainWindow::wireConnection() {
  connect(m_connection, &Connection::stateChanged, this, &MainWindow::onStateChanged);
  connect(m_connection, &Connection::subscribed, this, &MainWindow::onSubscribed);
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

void MainWindow::onStateChanged(Connection::State state, const QString& detail) {
  m_state = state;
  m_indicator->setState(state, detail);
}

void MainWindow::onSubscribed(int subscription) {
  m_subscriptions = subscription;
  m_feed->beginSession();
  if (subscription > 1)
    statusBar()->showMessage(tr("Feed resumed after reconnecting"), kStatusMessageMs);
}

void MainWindow::onFeedEvent(const v1::FeedEvent& event) {
  QString error;
  if (!m_feed->apply(event, &error))
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
  if (row.promptPreview.isEmpty() && row.promptIds.isEmpty()) {
    m_promptView->setNote(tr("The server never tokenized this prompt: nothing to re-analyze."),
                          true);
    return;
  }
  m_generateTag = 0;
  m_generation.clear();
  m_feedTokens = row.rpc == QLatin1String("Generate") ? row.tokens : QVector<FeedToken>();
  m_feedPromptTokens = row.promptTokens;
  // The feed carries the token ids of the whole prompt: re-analyze exactly
  // those (the text, possibly cut to the preview, only labels the view).
  const QString text = row.promptPreview.isEmpty() ? QString() : fullPromptFor(row);
  startAnalysis(text, row.model, row.promptIds);
  if (row.promptIds.isEmpty() && text.size() >= 80 && text == row.promptPreview) {
    m_promptView->setNote(
        tr("Only the first 80 characters of this prompt are known: analyzing those."));
  }
}

void MainWindow::onSend(const SendRequest& request) {
  if (request.generate) {
    generateFromPrompt(request.text, request.model, request.maxNewTokens);
  } else {
    analyzePrompt(request.text, request.model);
  }
}

void MainWindow::analyzePrompt(const QString& text, const QString& model) {
  m_generateTag = 0;
  m_generation.clear();
  m_feedTokens.clear();
  rememberSent(text);
  startAnalysis(text, model);
}

void MainWindow::generateFromPrompt(const QString& text, const QString& model, int maxNewTokens) {
  analyzePrompt(text, model);
  v1::GenerateRequest request;
  request.set_model(model.toStdString());
  request.set_text(text.toStdString());
  request.set_max_new_tokens(maxNewTokens);
  const quint64 tag = ++m_nextTag;
  m_generateTag = tag;
  Connection* connection = m_connection;
  QMetaObject::invokeMethod(
      connection, [connection, tag, request] { connection->generate(tag, request); },
      Qt::QueuedConnection);
}

void MainWindow::reanalyze() {
  if (m_analysis->promptText().isEmpty()) return;
  startAnalysis(m_analysis->promptText(), m_analysis->model());
}

void MainWindow::rememberSent(const QString& text) {
  m_sentPrompts.removeAll(text);
  m_sentPrompts.prepend(text);
  while (m_sentPrompts.size() > kMaxRememberedPrompts) m_sentPrompts.removeLast();
}

void MainWindow::startAnalysis(const QString& text, const QString& model,
                               const QVector<qint64>& ids) {
  Connection* connection = m_connection;
  const quint64 previous = m_analyzeTag;
  const quint64 tag = ++m_nextTag;
  m_analyzeTag = tag;
  m_analysis->reset(text, model);
  m_entropy.clear();
  v1::AnalyzeRequest request;
  request.set_model(model.toStdString());
  if (ids.isEmpty()) {
    request.set_text(text.toStdString());
  } else {
    for (const qint64 id : ids) request.mutable_ids()->add_ids(id);
  }
  request.mutable_options()->set_return_attention(true);  // every layer and head
  QMetaObject::invokeMethod(
      connection,
      [connection, previous, tag, request] {
        if (previous != 0) connection->cancel(previous);
        connection->analyze(tag, request);
      },
      Qt::QueuedConnection);
}

void MainWindow::onAnalyzeEvent(quint64 tag, const v1::AnalyzeEvent& event) {
  if (tag != m_analyzeTag) return;  // a request the user has moved on from
  m_analysis->addEvent(event);
  if (event.has_summary()) rebuildEntropy();
}

void MainWindow::onAnalyzeFinished(quint64 tag, bool ok, const QString& error) {
  if (tag != m_analyzeTag || ok) return;
  m_promptView->setNote(tr("Analyze failed: %1").arg(error), true);
}

void MainWindow::onGenerateEvent(quint64 tag, const v1::GenerateEvent& event) {
  if (tag != m_generateTag) return;
  QString error;
  if (!m_generation.addEvent(event, &error)) {
    m_promptView->setNote(tr("Generate: %1").arg(error), true);
    return;
  }
  m_promptView->setNote(tr("Generated: %1").arg(m_generation.text()));
  if (event.has_token()) rebuildEntropy();
}

void MainWindow::onGenerateFinished(quint64 tag, bool ok, const QString& error) {
  if (tag != m_generateTag || ok) return;
  m_promptView->setNote(tr("Generate failed: %1").arg(error), true);
}

void MainWindow::rebuildEntropy() {
  m_entropy.clear();
  const v1::Summary* summary = m_analysis->summary();
  const int tokens = m_analysis->tokenCount();
  if (summary != nullptr && summary->next_token_entropy_normalized_size() == tokens &&
      summary->next_token_entropy_nats_size() == tokens) {
    QStringList texts;
    for (int i = 0; i < tokens; ++i) texts << m_analysis->token(i).text;
    m_entropy.setPrompt(texts,
                        QVector<double>(summary->next_token_entropy_normalized().begin(),
                                        summary->next_token_entropy_normalized().end()),
                        QVector<double>(summary->next_token_entropy_nats().begin(),
                                        summary->next_token_entropy_nats().end()));
  }
  // Generated tokens that do not line up with the prompt are left out.
  for (const v1::GeneratedToken& t : m_generation.tokens()) {
    m_entropy.appendGenerated(t.position(), QString::fromStdString(t.text()),
                              t.entropy_normalized(), t.entropy_nats());
  }
  for (const FeedToken& t : m_feedTokens) {
    m_entropy.appendGenerated(m_feedPromptTokens + t.index, t.text, t.entropyNormalized,
                              t.entropyNats);
  }
  m_promptView->setEntropy(m_entropy);
}

}  // namespace attnscope::dashboard
