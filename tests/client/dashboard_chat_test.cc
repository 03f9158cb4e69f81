// Chat conversations from the dashboard's send box, end to end: the real
// attnscope-server serving the bundled model twice, once with a ChatML chat
// template written at test time, and the real MainWindow offscreen. A chat is
// rendered by the server (its markers structural), the line form and the
// JSON form give the same tokens, a malformed chat is refused in place and
// sends nothing, a model without a template says so in place.
#include <QComboBox>
#include <QDir>
#include <QFile>
#include <QLabel>
#include <QSettings>
#include <QTemporaryDir>
#include <QtTest>

#include "client/ui/main_window.h"
#include "client/ui/send_panel.h"
#include "tests/client/server_process.h"
#include "tests/client/window_test_support.h"

namespace attnscope::dashboard {
namespace {

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

using testing::fastReconnect;

QVector<qint64> shownIds(const PromptAnalysis& analysis) {
  QVector<qint64> ids;
  for (int i = 0; i < analysis.tokenCount(); ++i) ids << analysis.token(i).id;
  return ids;
}

}  // namespace

class DashboardChatTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(testing::useTestSettings(m_settingsDir, QStringLiteral("dashboard-chat")));
    QVERIFY(m_modelDir.isValid());
    QVERIFY(writeChatModel(m_modelDir.path()));
    QVERIFY2(m_server.start(0, kLong,
                            {QStringLiteral("--model"),
                             QStringLiteral("tiny-gpt2=" ATTNSCOPE_MODELS_DIR "/tiny-gpt2"),
                             QStringLiteral("--model"),
                             QStringLiteral("chat=") + m_modelDir.path()}),
             qPrintable(m_server.error()));
  }

  void chatIsRenderedByTheServer();
  void badChatsAreRefusedInPlace();

 private:
  // Sends the send box's content and waits for its status line to leave
  // "sent"/"analyzing"/"generating".
  QString sendAndWait(SendPanel* send);
  void selectModel(SendPanel* send, const QString& model);

  QTemporaryDir m_settingsDir;
  QTemporaryDir m_modelDir;
  ServerProcess m_server;
};

QString DashboardChatTest::sendAndWait(SendPanel* send) {
  send->send();
  const bool settled = QTest::qWaitFor(
      [&] {
        const QString s = send->statusText();
        return !s.startsWith(QLatin1String("sent")) && !s.startsWith(QLatin1String("analyzing"));
      },
      30000);
  return settled ? send->statusText() : QStringLiteral("still: ") + send->statusText();
}

void DashboardChatTest::selectModel(SendPanel* send, const QString& model) {
  auto* combo = send->findChild<QComboBox*>(QStringLiteral("sendModelCombo"));
  QVERIFY(combo != nullptr);
  QTRY_VERIFY_WITH_TIMEOUT(combo->findData(model) >= 0, 20000);
  combo->setCurrentIndex(combo->findData(model));
}

void DashboardChatTest::chatIsRenderedByTheServer() {
  MainWindow window(m_server.address(), fastReconnect());
  window.resize(1600, 1000);
  window.show();
  QTRY_COMPARE_WITH_TIMEOUT(window.connectionState(), Connection::State::Connected, kLong);
  SendPanel* send = window.sendPanel();
  selectModel(send, QStringLiteral("chat"));
  if (QTest::currentTestFailed()) return;
  send->setChat(true, /*addGenerationPrompt=*/true);
  QVERIFY(send->isChat());
  send->setPromptText(QStringLiteral("system: Be brief\nuser: Name a color"));
  const int rows = window.feedModel()->rowCount();
  QString status = sendAndWait(send);
  QVERIFY2(status.startsWith(QStringLiteral("done")), qPrintable(status));
  const PromptAnalysis& analysis = *window.analysis();
  QVERIFY(analysis.isComplete());
  QCOMPARE(QString::fromStdString(analysis.summary()->template_()), QStringLiteral("chat"));
  QString structural, content;
  for (int i = 0; i < analysis.tokenCount(); ++i) {
    (analysis.isStructural(i) ? structural : content) += analysis.token(i).text;
  }
  QCOMPARE(content, QStringLiteral("Be briefName a color"));
  QCOMPARE(structural, QStringLiteral("<|im_start|>system\n<|im_end|>\n<|im_start|>user\n"
                                      "<|im_end|>\n<|im_start|>assistant\n"));
  QCOMPARE(analysis.promptText(), QStringLiteral("system: Be brief · user: Name a color"));
  QTRY_VERIFY_WITH_TIMEOUT(window.feedModel()->rowCount() == rows + 1 &&
                               window.feedModel()->rowAt(0)->state == FeedRow::State::Finished,
                           10000);
  const QVector<qint64> fromLines = shownIds(analysis);

  // Hugging Face's JSON gives the same conversation, hence the same tokens.
  send->setPromptText(QStringLiteral(
      R"([{"role": "system", "content": "Be brief"}, {"role": "user", "content": "Name a color"}])"));
  status = sendAndWait(send);
  QVERIFY2(status.startsWith(QStringLiteral("done")), qPrintable(status));
  QCOMPARE(shownIds(analysis), fromLines);

  // Without the reply header the rendering ends after the user's message.
  send->setChat(true, false);
  status = sendAndWait(send);
  QVERIFY2(status.startsWith(QStringLiteral("done")), qPrintable(status));
  QVERIFY(analysis.tokenCount() < fromLines.size());
  QCOMPARE(shownIds(analysis), fromLines.mid(0, analysis.tokenCount()));

  // Generating from a chat continues after the assistant's header.
  send->setChat(true, true);
  send->setGenerate(true, 3);
  send->send();
  QTRY_VERIFY_WITH_TIMEOUT(window.feedModel()->rowAt(0)->rpc == QLatin1String("Generate") &&
                               window.feedModel()->rowAt(0)->state == FeedRow::State::Finished,
                           10000);
  const FeedRow* generated = window.feedModel()->rowAt(0);
  QCOMPARE(generated->promptTokens, int(fromLines.size()));
  QVERIFY(generated->generatedTokens >= 1 && generated->generatedTokens <= 3);
}

void DashboardChatTest::badChatsAreRefusedInPlace() {
  MainWindow window(m_server.address(), fastReconnect());
  window.resize(1600, 1000);
  window.show();
  QTRY_COMPARE_WITH_TIMEOUT(window.connectionState(), Connection::State::Connected, kLong);
  SendPanel* send = window.sendPanel();
  send->setChat(true);
  const int rows = window.feedModel()->rowCount();
  // Malformed: refused by the panel, nothing sent.
  for (const char* text : {"usr: hi", R"([{"content": "hi"}])", "[{\"role\": \"user\""}) {
    send->setPromptText(QString::fromUtf8(text));
    send->send();
    QVERIFY2(send->statusText().startsWith(QStringLiteral("chat")), qPrintable(send->statusText()));
    QVERIFY(send->statusLabel()->styleSheet().contains(QStringLiteral("#c62828")));
  }
  QCOMPARE(window.feedModel()->rowCount(), rows);

  // Token ids and chat exclude each other.
  send->setTokenIds(true);
  QVERIFY(!send->isChat());
  send->setChat(true);
  QVERIFY(!send->isTokenIds());

  // The bundled model has no chat template: the server says so, in place.
  selectModel(send, QStringLiteral("tiny-gpt2"));
  if (QTest::currentTestFailed()) return;
  send->setPromptText(QStringLiteral("user: hello"));
  const QString status = sendAndWait(send);
  QVERIFY2(status.startsWith(QStringLiteral("Analyze failed: INVALID_ARGUMENT")),
           qPrintable(status));
  QVERIFY2(status.contains(QStringLiteral("'tiny-gpt2' has no usable chat template")),
           qPrintable(status));
  QVERIFY(!window.analysis()->failure().isEmpty());
  QTRY_VERIFY_WITH_TIMEOUT(window.feedModel()->rowCount() == rows + 1, 10000);
  QCOMPARE(window.feedModel()->rowAt(0)->state, FeedRow::State::Failed);
}

}  // namespace attnscope::dashboard

QTEST_MAIN(attnscope::dashboard::DashboardChatTest)
#include "dashboard_chat_test.moc"
