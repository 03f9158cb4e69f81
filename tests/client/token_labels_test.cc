// How tokens read on screen: byte fragments as <0xNN>, never U+FFFD;
// fragments joined back into characters; how many axis labels fit.
#include <QtTest>
#include <string>

#include "client/models/token_labels.h"
#include "tests/client/test_registry.h"

namespace attnscope::dashboard {

class TokenLabelsTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void readableBytes_data() {
    QTest::addColumn<QByteArray>("bytes");
    QTest::addColumn<QString>("text");
    QTest::newRow("ascii") << QByteArray("cat") << "cat";
    QTest::newRow("a whole character") << QByteArray("\xE2\x80\x94") << QString::fromUtf8("—");
    QTest::newRow("a lone lead byte") << QByteArray("\xE2") << "<0xE2>";
    QTest::newRow("an incomplete sequence") << QByteArray("\xE6\x97") << "<0xE6><0x97>";
    QTest::newRow("a continuation byte") << QByteArray("\x80z") << "<0x80>z";
    QTest::newRow("text then a fragment") << QByteArray(" ok\xF0\x9F") << " ok<0xF0><0x9F>";
    QTest::newRow("overlong form") << QByteArray("\xC0\xAF") << "<0xC0><0xAF>";
    QTest::newRow("surrogate") << QByteArray("\xED\xA0\x80") << "<0xED><0xA0><0x80>";
    QTest::newRow("four bytes") << QByteArray("\xF0\x9F\x99\x82") << QString::fromUtf8("🙂");
    QTest::newRow("empty") << QByteArray() << "";
  }

  void readableBytes() {
    QFETCH(QByteArray, bytes);
    QFETCH(QString, text);
    const QString shown = attnscope::dashboard::readableBytes(bytes.toStdString());
    QCOMPARE(shown, text);
    QVERIFY(!shown.contains(QChar(0xFFFD)));
  }

  void joinTokenTexts_data() {
    QTest::addColumn<QStringList>("texts");
    QTest::addColumn<QString>("joined");
    QTest::newRow("plain tokens") << QStringList{"The", " cat"} << "The cat";
    QTest::newRow("fragments of one character")
        << QStringList{" <0xE2>", "<0x80>", "<0x94> ok"} << QString::fromUtf8(" — ok");
    QTest::newRow("a character cut at the end") << QStringList{"ok", "<0xE2>"} << "ok<0xE2>";
    QTest::newRow("two fragments that are no character")
        << QStringList{"<0x80>", "<0xFF>"} << "<0x80><0xFF>";
    QTest::newRow("text that only looks like a fragment")
        << QStringList{"<0x", "E2>", "<0xZZ>"} << "<0xE2><0xZZ>";
  }

  void joinTokenTexts() {
    QFETCH(QStringList, texts);
    QFETCH(QString, joined);
    QCOMPARE(attnscope::dashboard::joinTokenTexts(texts), joined);
  }

  void visibleTokenText_data() {
    QTest::addColumn<QString>("text");
    QTest::addColumn<int>("maxChars");
    QTest::addColumn<QString>("shown");
    const QString dot(QChar(0x00B7));
    QTest::newRow("leading space") << " cat" << 12 << dot + "cat";
    QTest::newRow("newline") << "\n" << 12 << QString(QChar(0x23CE));
    QTest::newRow("a control byte reads as its byte") << QString(QChar(0x01)) << 12 << "<0x01>";
    QTest::newRow("escape") << QString(QChar(0x1B)) + "[" << 12 << "<0x1B>[";
    QTest::newRow("byte fragment kept") << "<0xE2>" << 12 << "<0xE2>";
    QTest::newRow("cut") << "abcdefghijklmnop" << 5 << QStringLiteral("abcd") + QChar(0x2026);
    QTest::newRow("empty") << "" << 12 << QString(QChar(0x2205));
  }

  void visibleTokenText() {
    QFETCH(QString, text);
    QFETCH(int, maxChars);
    QFETCH(QString, shown);
    QCOMPARE(attnscope::dashboard::visibleTokenText(text, maxChars), shown);
  }

  void breakLongRuns_data() {
    QTest::addColumn<QString>("text");
    QTest::addColumn<int>("maxRun");
    QTest::addColumn<QString>("broken");  // '|' stands for U+200B
    QTest::newRow("short words untouched") << "generated 24 tokens" << 9 << "generated 24 tokens";
    QTest::newRow("one long run") << "abcdefghij" << 4 << "abcd|efgh|ij";
    QTest::newRow("runs restart at spaces") << "abc defgh" << 4 << "abc defg|h";
    QTest::newRow("exactly maxRun") << "abcd abcd" << 4 << "abcd abcd";
    QTest::newRow("a pair is one character") << QString::fromUtf8("ab🙂c") << 2
                                             << QString::fromUtf8("ab|🙂c");
    QTest::newRow("off") << "abcdefghij" << 0 << "abcdefghij";
  }

  void breakLongRuns() {
    QFETCH(QString, text);
    QFETCH(int, maxRun);
    QFETCH(QString, broken);
    const QString actual = attnscope::dashboard::breakLongRuns(text, maxRun);
    QCOMPARE(QString(actual).replace(QChar(0x200B), QLatin1Char('|')), broken);
    QCOMPARE(QString(actual).remove(QChar(0x200B)), text);  // nothing else changes
  }

  void labelStep_data() {
    QTest::addColumn<int>("count");
    QTest::addColumn<double>("pixels");
    QTest::addColumn<double>("labelPixels");
    QTest::addColumn<int>("step");
    QTest::newRow("16 tokens, room for all") << 16 << 500.0 << 12.0 << 1;
    QTest::newRow("60 tokens in 500 px") << 60 << 500.0 << 12.0 << 2;
    QTest::newRow("388 tokens in 640 px") << 388 << 640.0 << 12.0 << 10;
    QTest::newRow("2000 tokens in 640 px") << 2000 << 640.0 << 12.0 << 50;
    QTest::newRow("2000 tokens in 4000 px") << 2000 << 4000.0 << 12.0 << 10;
    QTest::newRow("no room: one label") << 30 << 0.0 << 12.0 << 30;
    QTest::newRow("NaN pixels: one label") << 30 << qQNaN() << 12.0 << 30;
    QTest::newRow("7 tokens in 20 px") << 7 << 20.0 << 12.0 << 5;
    QTest::newRow("2 tokens in 20 px: one label") << 2 << 20.0 << 12.0 << 2;
    QTest::newRow("no tokens") << 0 << 500.0 << 12.0 << 1;
  }

  void labelStep() {
    QFETCH(int, count);
    QFETCH(double, pixels);
    QFETCH(double, labelPixels);
    QFETCH(int, step);
    QCOMPARE(tokenLabelStep(count, pixels, labelPixels), step);
    // Labels never overlap at the chosen step (unless one label is all).
    if (step < count) QVERIFY(step * pixels / count >= labelPixels);
  }
};

ATTNSCOPE_REGISTER_TEST(TokenLabelsTest)

}  // namespace attnscope::dashboard

#include "token_labels_test.moc"
