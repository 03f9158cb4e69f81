// The dashboard's keyboard shortcuts, pressed on the real MainWindow
// (offscreen) connected to the real attnscope-server: F1 lists every key of
// docs/dashboard.md's shortcut table, each bound to an action of the window;
// Ctrl+Shift+N moves the focus to the prompt editor; F5 analyzes the shown
// prompt again with its own options, and a shown chat again as a chat.
#include <QAction>
#include <QApplication>
#include <QComboBox>
#include <QDir>
#include <QFile>
#include <QLineEdit>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QSettings>
#include <QTemporaryDir>
#include <QTimer>
#include <QtTest>
#include <cmath>

#include "client/ui/feed_panel.h"
#include "client/ui/main_window.h"
#include "client/ui/send_panel.h"
#include "tests/client/prompt_client.h"
#include "tests/client/server_process.h"
#include "tests/client/window_test_support.h"

namespace attnscope::dashboard {
namespace {

namespace v1 = attnscope::v1;
using testing::PromptClient;
using testing::ServerProcess;

constexpr int kLong = 90000;  // ms: loading models on a busy 2-core machine

const char kChatTemplateConfig[] = R"({"eos_token": "<|endoftext|>", "chat_template":
  "{% for m in messages %}{{ '<|im_start|>' + m.role + '\n' + m.content + '<|im_end|>\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"})";

// The bundled model's files (linked) with a tokenizer_config.json that has a
// chat template.
bool writeChatModel(const QString& dir) {
  const QDir bundled(QStringLiteral(ATTNSCOPE_MODELS_DIR "/tiny-gpt2"));
  for (const QString& name : bundled.entryList(QDir::Files)) {
    if (name == QLatin1String("tokenizer_config.json")) continue;
    if (!QFile::link(bundled.filePath(name), dir + QLatin1Char('/') + name)) return false;
  }
  QFile config(dir + QStringLiteral("/tokenizer_config.json"));
  return config.open(QIODevice::WriteOnly) && config.write(kChatTemplateConfig) > 0;
}

// The keys column of docs/dashboard.md's "| keys | action |" table.
QStringList documentedShortcutKeys() {
  QFile doc(QStringLiteral(ATTNSCOPE_DASHBOARD_DOC));
  if (!doc.open(QIODevice::ReadOnly | QIODevice::Text)) return {};
  const QStringList lines = QString::fromUtf8(doc.readAll()).split(QLatin1Char('\n'));
  QStringList keys;
  const int header = int(lines.indexOf(QStringLiteral("| keys | action |")));
  if (header < 0) return {};
  for (int i = header + 2; i < lines.size() && lines[i].startsWith(QLatin1Char('|')); ++i) {
    keys << lines[i].section(QLatin1Char('|'), 1, 1).trimmed();
  }
  return keys;
}

using testing::fastReconnect;

// False on NaN.
bool near(double a, double b, double tol) { return std::fabs(a - b) <= tol; }

QVector<qint64> shownIds(const PromptAnalysis& analysis) {
  QVector<qint64> ids;
  for (int i = 0; i < analysis.tokenCount(); ++i) ids << analysis.token(i).id;
  return ids;
}

QString structuralText(const PromptAnalysis& analysis) {
  QString structural;
  for (int i = 0; i < analysis.tokenCount(); ++i) {
    if (analysis.isStructural(i)) structural += analysis.token(i).text;
  }
  return structural;
}

// The newest feed row (source row) of Analyze whose preview is `text`; -1 if none.
int findAnalyzeRow(const FeedModel& feed, const QString& text) {
  for (int i = 0; i < feed.rowCount(); ++i) {
    const FeedRow* row = feed.rowAt(i);
    if (row->promptPreview == text && row->rpc == QLatin1String("Analyze")) return i;
  }
  return -1;
}

}  // namespace

class DashboardShortcutsTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(testing::useTestSettings(m_settingsDir, QStringLiteral("dashboard-shortcuts")));
    QVERIFY(m_modelDir.isValid());
    QVERIFY(writeChatModel(m_modelDir.path()));
    QVERIFY2(m_server.start(0, kLong,
                            {QStringLiteral("--model"),
                             QStringLiteral("tiny-gpt2=" ATTNSCOPE_MODELS_DIR "/tiny-gpt2"),
                             QStringLiteral("--model"),
                             QStringLiteral("chat=") + m_modelDir.path()}),
             qPrintable(m_server.error()));
  }

  void f1ListsEveryDocumentedShortcut();
  void ctrlShiftNFocusesThePromptEditor();
  void f5AnalyzesTheShownPromptAgainWithItsOptions();
  void f5SendsAShownChatAgainAsAChat();

 private:
  // Shows `window`, makes it the active window (shortcuts need it) and
  // waits until it is connected.
  void showConnected(MainWindow* window);

  QTemporaryDir m_settingsDir;
  QTemporaryDir m_modelDir;
  ServerProcess m_server;
};

void DashboardShortcutsTest::showConnected(MainWindow* window) {
  window->resize(1600, 1000);
  window->show();
  window->activateWindow();
  QVERIFY(QTest::qWaitForWindowActive(window));
  QTRY_COMPARE_WITH_TIMEOUT(window->connectionState(), Connection::State::Connected, kLong);
}

void DashboardShortcutsTest::f1ListsEveryDocumentedShortcut() {
  const QStringList keys = documentedShortcutKeys();
  QVERIFY2(keys.size() >= 6, qPrintable(keys.join(QStringLiteral(", "))));
  for (const char* promised : {"F1", "F5", "Ctrl+Shift+N"}) {
    QVERIFY2(keys.contains(QLatin1String(promised)), promised);
  }
  MainWindow window(m_server.address(), fastReconnect());
  showConnected(&window);
  if (QTest::currentTestFailed()) return;

  // Every documented key is the shortcut of an action of the window.
  QList<QKeySequence> bound;
  for (const QAction* action : window.findChildren<QAction*>()) bound += action->shortcuts();
  for (const QString& key : keys) {
    QVERIFY2(bound.contains(QKeySequence(key)), qPrintable(key + QStringLiteral(" is not bound")));
  }

  // F1 opens a modal list (keyClick returns once it is closed); a timer
  // polls for it inside its event loop, reads it and closes it.
  QVERIFY(QApplication::activeModalWidget() == nullptr);
  QString title, text;
  bool answered = false;
  QTimer poll;
  poll.setInterval(10);
  QObject::connect(&poll, &QTimer::timeout, [&] {
    auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget());
    if (box == nullptr) return;
    poll.stop();
    title = box->windowTitle();
    text = box->text();
    answered = true;
    box->accept();
  });
  poll.start();
  QTest::keyClick(window.windowHandle(), Qt::Key_F1);
  QTRY_VERIFY_WITH_TIMEOUT(answered, 10000);
  QCOMPARE(title, QStringLiteral("Keyboard shortcuts"));
  for (const QString& key : keys) {
    QVERIFY2(text.contains(QStringLiteral("<b>%1</b>").arg(key.toHtmlEscaped())),
             qPrintable(key + QStringLiteral(" missing from: ") + text));
  }
  QTRY_VERIFY(QApplication::activeModalWidget() == nullptr);
}

void DashboardShortcutsTest::ctrlShiftNFocusesThePromptEditor() {
  MainWindow window(m_server.address(), fastReconnect());
  showConnected(&window);
  if (QTest::currentTestFailed()) return;
  QLineEdit* filter = window.feedPanel()->filterEdit();
  QPlainTextEdit* prompt = window.sendPanel()->promptEdit();
  window.sendPanel()->setPromptText(QString());

  // Ctrl+L puts the focus in the feed filter; Ctrl+Shift+N takes it to the
  // prompt editor.
  QTest::keyClick(window.windowHandle(), Qt::Key_L, Qt::ControlModifier);
  QTRY_VERIFY(filter->hasFocus());
  QVERIFY(!prompt->hasFocus());
  QTest::keyClick(window.windowHandle(), Qt::Key_N, Qt::ControlModifier | Qt::ShiftModifier);
  QTRY_VERIFY(prompt->hasFocus());
  QVERIFY(!filter->hasFocus());

  // What is typed on the window now lands in the prompt, not in the filter.
  QTest::keyClick(window.windowHandle(), 'h');
  QTest::keyClick(window.windowHandle(), 'i');
  QCOMPARE(prompt->toPlainText(), QStringLiteral("hi"));
  QCOMPARE(filter->text(), QString());
}

// Every row in one line, for a failure message.
QString dumpRows(const FeedModel& feed) {
  QString out;
  for (int i = 0; i < feed.rowCount(); ++i) {
    const FeedRow* r = feed.rowAt(i);
    out += QStringLiteral(" [%1: %2/%3 %4 state %5 %6 '%7']")
               .arg(i)
               .arg(r->session)
               .arg(r->requestId)
               .arg(r->rpc)
               .arg(int(r->state))
               .arg(r->status)
               .arg(r->promptPreview.left(30));
  }
  return out;
}

void DashboardShortcutsTest::f5AnalyzesTheShownPromptAgainWithItsOptions() {
  MainWindow window(m_server.address(), fastReconnect());
  showConnected(&window);
  if (QTest::currentTestFailed()) return;
  QTRY_COMPARE_WITH_TIMEOUT(window.subscriptions(), 1, kLong);

  // Another client analyzes with its own options; the row is selected.
  const QString text = QStringLiteral("Press F5 to see the cat sat on the mat again.");
  v1::AnalyzeRequest request;
  request.set_model("tiny-gpt2");
  request.set_text(text.toStdString());
  request.mutable_options()->set_threshold(0.5);
  request.mutable_options()->set_template_("chatml");
  QVector<v1::AnalyzeEvent> events;
  QCOMPARE(PromptClient(m_server.address()).analyzeRequest(request, &events),
           QStringLiteral("OK"));
  QVERIFY(!events.isEmpty() && events.last().has_summary());
  const FeedModel& feed = *window.feedModel();
  QTRY_VERIFY_WITH_TIMEOUT(findAnalyzeRow(feed, text) >= 0 &&
                               feed.rowAt(findAnalyzeRow(feed, text))->hasDetail(),
                           20000);
  const FeedRow original = *feed.rowAt(findAnalyzeRow(feed, text));
  QVERIFY(!original.promptIds.isEmpty());
  FeedPanel* panel = window.feedPanel();
  panel->selectRow(
      panel->proxy()->mapFromSource(feed.index(findAnalyzeRow(feed, text), 0)).row());
  QTRY_VERIFY(window.analysis()->isComplete());
  QCOMPARE(window.analysis()->tokenCount(), int(original.promptIds.size()));
  const int rows = feed.rowCount();

  // F5: the same prompt analyzed again as a request of the user's, so a new
  // feed row with the same tokens, options and numbers.
  QTest::keyClick(window.windowHandle(), Qt::Key_F5);
  // Only the one new row: the dashboard's own head fetch, cancelled by F5,
  // stays out of the feed even when it is cancelled before it starts.
  QTRY_VERIFY2_WITH_TIMEOUT(
      feed.rowCount() == rows + 1 && feed.rowAt(0)->state == FeedRow::State::Finished,
      qPrintable(QStringLiteral("rows %1 -> %2:").arg(rows).arg(feed.rowCount()) + dumpRows(feed)),
      20000);
  const FeedRow* again = feed.rowAt(0);
  QCOMPARE(again->rpc, QStringLiteral("Analyze"));
  QCOMPARE(again->status, QStringLiteral("OK"));
  QCOMPARE(again->model, QStringLiteral("tiny-gpt2"));
  QVERIFY(again->session != original.session || again->requestId != original.requestId);
  QCOMPARE(again->promptIds, original.promptIds);
  QVERIFY(again->options.has_threshold());
  QVERIFY(near(again->options.threshold(), 0.5, 0.0));
  QCOMPARE(QString::fromStdString(again->options.template_()), QStringLiteral("chatml"));
  QCOMPARE(again->sinkCount, original.sinkCount);
  QVERIFY2(near(again->health, original.health, 1e-6),
           qPrintable(QStringLiteral("%1 vs %2").arg(again->health).arg(original.health)));

  // The prompt view shows the new analysis, complete.
  QTRY_VERIFY_WITH_TIMEOUT(window.analysis()->isComplete(), 20000);
  QCOMPARE(shownIds(*window.analysis()), original.promptIds);
  QVERIFY(near(window.analysis()->summary()->health(), again->health, 1e-9));
  QCOMPARE(window.analysis()->errors(), QStringList());
  QTRY_VERIFY(window.sendPanel()->statusText().startsWith(QStringLiteral("done")));
}

void DashboardShortcutsTest::f5SendsAShownChatAgainAsAChat() {
  MainWindow window(m_server.address(), fastReconnect());
  showConnected(&window);
  if (QTest::currentTestFailed()) return;
  SendPanel* send = window.sendPanel();
  auto* combo = send->findChild<QComboBox*>(QStringLiteral("sendModelCombo"));
  QVERIFY(combo != nullptr);
  QTRY_VERIFY_WITH_TIMEOUT(combo->findData(QStringLiteral("chat")) >= 0, 20000);
  combo->setCurrentIndex(combo->findData(QStringLiteral("chat")));
  send->setChat(true, /*addGenerationPrompt=*/true);
  send->setPromptText(QStringLiteral("system: Be brief\nuser: Name a color"));
  const FeedModel& feed = *window.feedModel();
  const int before = feed.rowCount();
  send->send();
  QTRY_VERIFY_WITH_TIMEOUT(send->statusText().startsWith(QStringLiteral("done")), 30000);
  QTRY_VERIFY_WITH_TIMEOUT(feed.rowCount() == before + 1 &&
                               feed.rowAt(0)->state == FeedRow::State::Finished,
                           10000);
  const PromptAnalysis& analysis = *window.analysis();
  QCOMPARE(QString::fromStdString(analysis.summary()->template_()), QStringLiteral("chat"));
  const QVector<qint64> ids = shownIds(analysis);
  const QString structural = structuralText(analysis);
  QVERIFY(structural.contains(QStringLiteral("<|im_start|>user\n")));

  // F5 with the chat shown and the focus out of the send box (in the feed
  // filter: focusing the feed table would select its first row instead).
  QTest::keyClick(window.windowHandle(), Qt::Key_L, Qt::ControlModifier);
  QTRY_VERIFY(window.feedPanel()->filterEdit()->hasFocus());
  QTest::keyClick(window.windowHandle(), Qt::Key_F5);
  QTRY_VERIFY_WITH_TIMEOUT(feed.rowCount() == before + 2 &&
                               feed.rowAt(0)->state == FeedRow::State::Finished,
                           30000);
  const FeedRow* again = feed.rowAt(0);
  QCOMPARE(again->rpc, QStringLiteral("Analyze"));
  QCOMPARE(again->model, QStringLiteral("chat"));
  QCOMPARE(again->promptIds, ids);
  // Sent as a chat: the server rendered it with the template, so its
  // structural positions are the template's (as ids they would not be).
  QVERIFY(again->hasDetail());
  QCOMPARE(QString::fromStdString(again->detail->summary().template_()), QStringLiteral("chat"));
  QTRY_VERIFY_WITH_TIMEOUT(analysis.isComplete(), 20000);
  QCOMPARE(QString::fromStdString(analysis.summary()->template_()), QStringLiteral("chat"));
  QCOMPARE(shownIds(analysis), ids);
  QCOMPARE(structuralText(analysis), structural);
}

}  // namespace attnscope::dashboard

QTEST_MAIN(attnscope::dashboard::DashboardShortcutsTest)
#include "dashboard_shortcuts_test.moc"
