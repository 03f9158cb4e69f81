// Time-axis ticks (issue 31 item 7: labels repeated): a round interval, a
// format no finer than it, every label distinct, every point inside.
#include <QSet>
#include <QtTest>

#include "client/models/time_axis.h"
#include "tests/client/test_registry.h"

namespace attnscope::dashboard {

class TimeAxisTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void ticks_data() {
    QTest::addColumn<qint64>("spanMs");
    QTest::addColumn<qint64>("intervalMs");
    QTest::addColumn<QString>("format");
    QTest::newRow("0 s") << qint64(0) << qint64(1000) << "HH:mm:ss";
    QTest::newRow("2 s") << qint64(2000) << qint64(1000) << "HH:mm:ss";
    QTest::newRow("7 s") << qint64(7000) << qint64(5000) << "HH:mm:ss";
    QTest::newRow("55 s") << qint64(55000) << qint64(30000) << "HH:mm:ss";
    QTest::newRow("2 min") << qint64(120000) << qint64(60000) << "HH:mm";
    QTest::newRow("40 min") << qint64(2400000) << qint64(900000) << "HH:mm";
    QTest::newRow("5 h") << qint64(5 * 3600000LL) << qint64(2 * 3600000LL) << "HH:mm";
    QTest::newRow("3 days") << qint64(3 * 86400000LL) << qint64(86400000LL) << "MMM d";
    QTest::newRow("2 years") << qint64(730 * 86400000LL) << qint64(365 * 86400000LL)
                             << "yyyy-MM-dd";
  }

  void ticks() {
    QFETCH(qint64, spanMs);
    QFETCH(qint64, intervalMs);
    QFETCH(QString, format);
    const QDateTime first(QDate(2024, 12, 5), QTime(7, 27, 51, 300));
    const QDateTime last = first.addMSecs(spanMs);
    const TimeTicks ticks = timeTicks(first, last, 5);
    QCOMPARE(ticks.intervalMs, intervalMs);
    QCOMPARE(ticks.format, format);
    QVERIFY(ticks.count >= 2 && ticks.count <= 5);
    QVERIFY(ticks.min <= first && ticks.max >= last);
    QCOMPARE(ticks.min.msecsTo(ticks.max), (ticks.count - 1) * intervalMs);
    QCOMPARE(ticks.min.toMSecsSinceEpoch() % intervalMs, qint64(0));
    const QStringList labels = timeTickLabels(ticks);
    QCOMPARE(labels.size(), ticks.count);
    QCOMPARE(QSet<QString>(labels.begin(), labels.end()).size(), labels.size());
  }

  void reversedOrderIsTheSameAxis() {
    const QDateTime a(QDate(2024, 12, 5), QTime(7, 0));
    const QDateTime b = a.addSecs(90);
    QCOMPARE(timeTicks(b, a).min, timeTicks(a, b).min);
    QCOMPARE(timeTicks(b, a).count, timeTicks(a, b).count);
  }

  void twoSecondsReadAsSeconds() {
    // The burst the issue saw: 07:27:51 four times over two seconds.
    const QDateTime first(QDate(2024, 12, 5), QTime(7, 27, 50, 500));
    const QStringList labels = timeTickLabels(timeTicks(first, first.addMSecs(2000)));
    QCOMPARE(labels, QStringList({"07:27:50", "07:27:51", "07:27:52", "07:27:53"}));
  }
};

ATTNSCOPE_REGISTER_TEST(TimeAxisTest)

}  // namespace attnscope::dashboard

#include "time_axis_test.moc"
