// The send box's chat conversations: the "role: content" lines and Hugging
// Face's JSON, and the errors shown in place for what cannot be sent.
#include "client/models/chat_input.h"

#include <QtTest>

#include "tests/client/test_registry.h"

using Messages = QVector<attnscope::dashboard::ChatMessageInput>;
Q_DECLARE_METATYPE(Messages)

namespace attnscope::dashboard {

class ChatInputTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void parses_data() {
    QTest::addColumn<QString>("text");
    QTest::addColumn<Messages>("messages");
    QTest::newRow("lines") << "system: Be brief\nuser: Name a colour"
                           << Messages{{"system", "Be brief"}, {"user", "Name a colour"}};
    QTest::newRow("continued lines, any case, CRLF")
        << "\n  User:  two\r\nlines\r\n\r\nASSISTANT:ok\n\n"
        << Messages{{"user", " two\nlines"}, {"assistant", "ok"}};
    QTest::newRow("a colon in content is content")
        << "user: Note: this stays\nps: so does this"
        << Messages{{"user", "Note: this stays\nps: so does this"}};
    QTest::newRow("empty content") << "user: hi\nassistant:"
                                   << Messages{{"user", "hi"}, {"assistant", ""}};
    QTest::newRow("every role") << "system: a\nuser: b\nassistant: c\ntool: d\ndeveloper: e"
                                << Messages{{"system", "a"}, {"user", "b"}, {"assistant", "c"},
                                            {"tool", "d"}, {"developer", "e"}};
    QTest::newRow("json array")
        << R"([{"role": "system", "content": "Be brief"}, {"role": "user", "content": "Hi\nthere"}])"
        << Messages{{"system", "Be brief"}, {"user", "Hi\nthere"}};
    QTest::newRow("json object, custom role, null content")
        << R"( {"messages": [{"role": "ipython", "content": null}]} )"
        << Messages{{"ipython", ""}};
  }

  void parses() {
    QFETCH(QString, text);
    QFETCH(Messages, messages);
    Messages parsed;
    QString error;
    QVERIFY2(parseChat(text, &parsed, &error), qPrintable(error));
    QCOMPARE(parsed.size(), messages.size());
    for (int i = 0; i < messages.size(); ++i) {
      QCOMPARE(parsed[i].role, messages[i].role);
      QCOMPARE(parsed[i].content, messages[i].content);
    }
  }

  void refuses_data() {
    QTest::addColumn<QString>("text");
    QTest::addColumn<QString>("errorPart");
    QTest::newRow("empty") << "  \n " << "the chat is empty";
    QTest::newRow("no role first") << "\nhello\nuser: hi" << "chat line 2 ('hello'): a message starts with a role";
    QTest::newRow("unknown role first") << "usr: hi" << "chat line 1 ('usr: hi')";
    QTest::newRow("bad json") << R"([{"role": "user", "content": "hi"})" << "chat JSON at byte";
    QTest::newRow("json empty") << "[]" << "chat JSON: no messages";
    QTest::newRow("json not object") << R"([{"role": "user", "content": "a"}, 3])"
                                     << "chat JSON message 2: not an object";
    QTest::newRow("json no role") << R"([{"content": "a"}])"
                                  << "chat JSON message 1: \"role\" is missing";
    QTest::newRow("json blank role") << R"([{"role": " ", "content": "a"}])"
                                     << "chat JSON message 1: \"role\" is missing";
    QTest::newRow("json content list") << R"([{"role": "user", "content": [{"type": "text"}]}])"
                                       << "chat JSON message 1: \"content\" is not a string";
    QTest::newRow("json object without messages") << R"({"role": "user"})"
                                                  << "needs a \"messages\" array";
    QTest::newRow("kwargs not an object")
        << R"({"messages": [{"role": "user", "content": "a"}], "chat_template_kwargs": [1]})"
        << "\"chat_template_kwargs\" is not an object";
    QTest::newRow("kwargs set the request's own")
        << R"({"messages": [{"role": "user", "content": "a"}], "chat_template_kwargs": {"add_generation_prompt": true}})"
        << "\"add_generation_prompt\" is the request's own";
    QTest::newRow("tools not an array")
        << R"({"messages": [{"role": "user", "content": "a"}], "tools": {}})"
        << "\"tools\" is not an array";
    QTest::newRow("tools twice")
        << R"({"messages": [{"role": "user", "content": "a"}], "tools": [], "chat_template_kwargs": {"tools": []}})"
        << "\"tools\" given twice";
  }

  void refuses() {
    QFETCH(QString, text);
    QFETCH(QString, errorPart);
    Messages parsed{{"stale", "x"}};
    QString error;
    QVERIFY(!parseChat(text, &parsed, &error));
    QVERIFY2(error.contains(errorPart), qPrintable(error));
    QVERIFY(parsed.isEmpty());
  }

  // The JSON object form's template variables, as vLLM's request body has
  // them; the other forms have none.
  void templateKwargs() {
    Messages parsed;
    QString error;
    QString kwargs = QStringLiteral("stale");
    QVERIFY2(parseChat(QStringLiteral(R"({"messages": [{"role": "user", "content": "a"}],
        "chat_template_kwargs": {"enable_thinking": false}, "tools": [{"name": "f"}]})"),
                       &parsed, &error, &kwargs),
             qPrintable(error));
    QCOMPARE(parsed.size(), 1);
    QCOMPARE(kwargs, QStringLiteral(R"({"enable_thinking":false,"tools":[{"name":"f"}]})"));
    QVERIFY2(parseChat(QStringLiteral("user: a"), &parsed, &error, &kwargs), qPrintable(error));
    QVERIFY(kwargs.isEmpty());
    QVERIFY2(parseChat(QStringLiteral(R"({"messages": [{"role": "user", "content": "a"}]})"), &parsed,
                       &error, &kwargs),
             qPrintable(error));
    QVERIFY(kwargs.isEmpty());
  }

  void preview() {
    const Messages messages{{"system", "Be\nbrief"}, {"user", QString(50, QLatin1Char('x'))}};
    QCOMPARE(chatPreview(messages, 10),
             QStringLiteral("system: Be brief · user: xxxxxxxxxx…"));
  }
};

ATTNSCOPE_REGISTER_TEST(ChatInputTest)

}  // namespace attnscope::dashboard

#include "chat_input_test.moc"
