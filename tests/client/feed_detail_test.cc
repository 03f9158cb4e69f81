// What the dashboard shows of a feed row without analyzing it again: the
// details the feed carries, heads fetched on demand, dashboard-origin
// requests kept out of the feed, failed rows, trends across requests, typed
// token ids and dense sink grids.
#include <QSignalSpy>
#include <QtTest>

#include "client/models/feed_model.h"
#include "client/models/heatmap_model.h"
#include "client/models/prompt_analysis.h"
#include "client/models/request_trends.h"
#include "client/models/sink_grid_model.h"
#include "client/models/token_ids.h"
#include "tests/client/event_builders.h"
#include "tests/client/test_registry.h"

namespace attnscope::dashboard {
namespace {

namespace v1 = attnscope::v1;
using namespace testing;  // NOLINT: the builders are the vocabulary here

const QStringList kTexts = {QStringLiteral("<|im_start|>"), QStringLiteral("The"),
                            QStringLiteral(" cat"), QStringLiteral(" sat")};

// A finished Analyze as the server publishes it: tokens, `layers` x `heads`
// statistics, a summary made with threshold 0.5 and template chatml.
v1::FeedEvent finishedWithDetail(quint64 id, int layers, int heads) {
  v1::FeedEvent event = finished(id, 5.8, 2);
  v1::RequestFinished* f = event.mutable_finished();
  f->mutable_options()->set_threshold(0.5);
  f->mutable_options()->set_template_("chatml");
  *f->mutable_tokens() = tokens(kTexts).tokens();
  for (int l = 0; l < layers; ++l) {
    QVector<double> scores;
    for (int h = 0; h < heads; ++h) scores << 0.01 * (l * heads + h) / (layers * heads);
    *f->add_layers() = layer(l, scores).layer();
  }
  v1::Summary summary = testing::summary(kTexts.size(), 5.8, {{2, 3.1}, {3, 0.9}}).summary();
  summary.set_threshold(0.5);
  summary.set_template_("chatml");
  *f->mutable_summary() = summary;
  f->set_prompt_tokens(kTexts.size());
  for (int i = 0; i < kTexts.size(); ++i) f->add_prompt_ids(100 + i);
  return event;
}

}  // namespace

class FeedDetailTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void dashboardRequestsAreNotRows() {
    FeedModel feed;
    v1::FeedEvent start = started(1);
    start.mutable_started()->set_origin(v1::REQUEST_ORIGIN_DASHBOARD);
    v1::FeedEvent end = finished(1, 9.0);
    end.mutable_finished()->set_origin(v1::REQUEST_ORIGIN_DASHBOARD);
    end.mutable_finished()->set_status("CANCELLED");
    QSignalSpy finishedSpy(&feed, &FeedModel::requestFinished);
    QVERIFY(feed.apply(start));
    QVERIFY(feed.apply(end));
    QCOMPARE(feed.rowCount(), 0);
    QCOMPARE(feed.dashboardRequests(), quint64(1));
    QCOMPARE(finishedSpy.count(), 0);
    // A user's request with the same id is a row as usual.
    QVERIFY(feed.apply(started(1)));
    QVERIFY(feed.apply(finished(1, 7.0)));
    QCOMPARE(feed.rowCount(), 1);
    QCOMPARE(finishedSpy.count(), 1);
    QCOMPARE(finishedSpy.first().first().toInt(), 0);
  }

  void finishedRowKeepsTheDetailAndOptions() {
    FeedModel feed;
    v1::FeedEvent start = started(4);
    start.mutable_started()->mutable_options()->set_threshold(0.5);
    QVERIFY(feed.apply(start));
    QCOMPARE(feed.rowAt(0)->options.threshold(), 0.5);
    QVERIFY(!feed.rowAt(0)->hasDetail());
    QVERIFY(feed.apply(finishedWithDetail(4, 3, 2)));
    const FeedRow& row = *feed.rowAt(0);
    QVERIFY(row.hasDetail());
    QCOMPARE(row.options.template_(), std::string("chatml"));
    QCOMPARE(row.detail->layers_size(), 3);
  }

  // The detail panel shows the row's own numbers: health 5.8 and 2 sinks
  // from threshold 0.5 / chatml, not a re-analysis with defaults.
  void loadFinishedShowsTheRowsOwnNumbers() {
    const v1::FeedEvent event = finishedWithDetail(4, 3, 2);
    PromptAnalysis analysis;
    QSignalSpy layers(&analysis, &PromptAnalysis::layerAdded);
    QString error;
    QVERIFY2(analysis.loadFinished(event.finished(), QStringLiteral("The cat sat"), &error),
             qPrintable(error));
    QCOMPARE(analysis.tokenCount(), kTexts.size());
    QCOMPARE(analysis.layerCount(), 3);
    QCOMPARE(analysis.headCount(), 2);
    QCOMPARE(layers.count(), 3);
    QVERIFY(analysis.isComplete());
    QCOMPARE(analysis.summary()->health(), 5.8);
    QCOMPARE(analysis.summary()->sinks_size(), 2);
    QCOMPARE(analysis.summary()->threshold(), 0.5);
    QVERIFY(analysis.isStructural(0));
    QVERIFY(analysis.isSink(2));
    QCOMPARE(analysis.model(), QStringLiteral("tiny"));
    QCOMPARE(analysis.promptText(), QStringLiteral("The cat sat"));
    QVERIFY(analysis.attention(0, 0) == nullptr);  // fetched on demand
  }

  void loadFinishedRejectsAnIncompleteRow() {
    v1::FeedEvent event = finishedWithDetail(4, 2, 2);
    event.mutable_finished()->clear_summary();
    PromptAnalysis analysis;
    QString error;
    QVERIFY(!analysis.loadFinished(event.finished(), QString(), &error));
    QVERIFY2(error.contains(QStringLiteral("summary")), qPrintable(error));
    event = finishedWithDetail(4, 2, 2);
    event.mutable_finished()->mutable_layers(1)->add_sink_score(0.5);  // 3 heads, then 2
    QVERIFY(!analysis.loadFinished(event.finished(), QString(), &error));
    QVERIFY2(error.contains(QStringLiteral("layer 1")), qPrintable(error));
  }

  void fetchedAttentionArrivesAfterTheSummary() {
    const v1::FeedEvent event = finishedWithDetail(4, 3, 2);
    PromptAnalysis analysis;
    HeatmapModel heatmap;
    heatmap.setAnalysis(&analysis);
    QVERIFY(analysis.loadFinished(event.finished(), QString()));
    heatmap.setHead(2, 1);
    QVERIFY(!heatmap.hasWeights());
    const int t = kTexts.size();
    const QVector<float> weights = causalWeights(t, 2.0);
    for (const auto& chunk : attentionChunks(2, 1, t, weights, 16)) {
      QString error;
      QVERIFY2(analysis.addFetchedAttention(chunk.attention(), &error), qPrintable(error));
    }
    QVERIFY(heatmap.hasWeights());
    QCOMPARE(heatmap.index(t - 1, 0).data(HeatmapModel::WeightRole).toDouble(),
             double(weights[(t - 1) * t]));
    // A second fetch of the same head changes nothing; an unknown layer fails.
    QVERIFY(
        analysis.addFetchedAttention(attentionChunks(2, 1, t, weights, 64).first().attention()));
    QString error;
    QVERIFY(!analysis.addFetchedAttention(attentionChunks(7, 0, t, weights, 64).first().attention(),
                                          &error));
    QVERIFY2(error.contains(QStringLiteral("layer")), qPrintable(error));
  }

  void failureIsShownNotSpun() {
    PromptAnalysis analysis;
    analysis.reset(QStringLiteral("hello"), QStringLiteral("tiny"));
    QSignalSpy failed(&analysis, &PromptAnalysis::failed);
    analysis.markFailed(QStringLiteral("UNAVAILABLE: not connected to a server"));
    QCOMPARE(failed.count(), 1);
    QCOMPARE(analysis.failure(), QStringLiteral("UNAVAILABLE: not connected to a server"));
    analysis.reset();
    QVERIFY(analysis.failure().isEmpty());
  }

  void rejectedRowSaysWhyInsteadOfAnEmptyPrompt() {
    FeedModel feed;
    v1::FeedEvent event = finished(3, 0.0, 0, QStringLiteral("RESOURCE_EXHAUSTED"));
    event.mutable_finished()->clear_prompt_preview();
    event.mutable_finished()->set_error_message("the queue is full (64 waiting)");
    QVERIFY(feed.apply(event));
    QCOMPARE(feed.index(0, FeedModel::Prompt).data().toString(),
             QStringLiteral("(RESOURCE_EXHAUSTED) the queue is full (64 waiting)"));
    QVERIFY(feed.index(0, FeedModel::Prompt).data(Qt::BackgroundRole).isValid());
    QVERIFY(!feed.index(0, FeedModel::Health).data(FeedModel::HealthLevelRole).isValid());
    QVERIFY(!feed.rowAt(0)->hasDetail());
  }

  void trendsFollowFinishedAnalyses() {
    FeedModel feed;
    RequestTrends trends;
    QVERIFY(feed.apply(finished(2, 8.0, 1)));
    QVERIFY(feed.apply(finished(1, 4.0, 3)));  // finished later, started earlier
    QVERIFY(feed.apply(finished(3, 0.0, 0, QStringLiteral("OK"), QStringLiteral("tiny"),
                                QStringLiteral("Generate"))));
    QVERIFY(feed.apply(finished(4, 0.0, 0, QStringLiteral("INTERNAL"))));
    for (int i = 0; i < feed.rowCount(); ++i) trends.add(*feed.rowAt(i));
    QVERIFY(!trends.add(*feed.rowAt(0)));  // no duplicates
    const QVector<TrendPoint> points = trends.points();
    QCOMPARE(points.size(), 2);
    QCOMPARE(points[0].requestId, quint64(1));  // oldest first, by time
    QCOMPARE(points[0].health, 4.0);
    QCOMPARE(points[0].sinks, 3);
    QCOMPARE(points[1].requestId, quint64(2));
    QCOMPARE(points[1].maxEntropy, 0.42);
    QCOMPARE(trends.points(QStringLiteral("other")).size(), 0);
    FeedModel many;
    RequestTrends capped;
    for (int i = 0; i < RequestTrends::kMaxPoints + 10; ++i) {
      QVERIFY(many.apply(finished(100 + i, 7.0)));
      capped.add(*many.rowAt(0));
    }
    QCOMPARE(capped.size(), RequestTrends::kMaxPoints);
    QCOMPARE(capped.points().first().requestId, quint64(110));
  }

  void tokenIds_data() {
    QTest::addColumn<QString>("text");
    QTest::addColumn<qint64>("vocab");
    QTest::addColumn<QVector<qint64>>("ids");
    QTest::addColumn<QString>("error");  // a part of the message
    QTest::newRow("commas") << "50256, 464,3797" << qint64(0) << QVector<qint64>{50256, 464, 3797}
                            << "";
    QTest::newRow("spaces and brackets")
        << " [1 2\n3] " << qint64(10) << QVector<qint64>{1, 2, 3} << "";
    QTest::newRow("empty entry") << "1,,2" << qint64(0) << QVector<qint64>()
                                 << "token id 2 is empty";
    QTest::newRow("not a number") << "1, two" << qint64(0) << QVector<qint64>() << "'two'";
    QTest::newRow("negative") << "-1" << qint64(0) << QVector<qint64>() << "non-negative";
    QTest::newRow("beyond the vocabulary")
        << "3, 10" << qint64(10) << QVector<qint64>() << "outside the vocabulary [0, 10)";
    QTest::newRow("nothing") << "  " << qint64(0) << QVector<qint64>() << "no token ids";
  }

  void tokenIds() {
    QFETCH(QString, text);
    QFETCH(qint64, vocab);
    QFETCH(QVector<qint64>, ids);
    QFETCH(QString, error);
    QVector<qint64> parsed;
    QString problem;
    QCOMPARE(parseTokenIds(text, &parsed, &problem, vocab), error.isEmpty());
    QCOMPARE(parsed, ids);
    QVERIFY2(problem.contains(error), qPrintable(problem));
  }

  // 32 x 32 heads (Llama-7B): colour-only cells, values in tooltips, bare
  // numeric headers; every head is a cell.
  void denseSinkGridIsColourOnly() {
    const v1::FeedEvent event = finishedWithDetail(4, 32, 32);
    PromptAnalysis analysis;
    QVERIFY(analysis.loadFinished(event.finished(), QString()));
    SinkGridModel grid;
    grid.setAnalysis(&analysis);
    QCOMPARE(grid.rowCount(), 32);
    QCOMPARE(grid.columnCount(), 32);
    const QModelIndex last = grid.index(31, 31);
    QCOMPARE(last.data().toString(),
             QString::number(last.data(SinkGridModel::ValueRole).toDouble(), 'f', 2));
    grid.setLabelled(false);
    QVERIFY(!last.data().isValid());
    QVERIFY(last.data(Qt::BackgroundRole).isValid());
    QVERIFY(last.data(SinkGridModel::ValueRole).isValid());
    QVERIFY(last.data(Qt::ToolTipRole).toString().contains(QStringLiteral("layer 31, head 31")));
    QVERIFY(last.data(Qt::ToolTipRole).toString().contains(QStringLiteral("sink score")));
    QCOMPARE(grid.headerData(31, Qt::Horizontal).toString(), QStringLiteral("31"));
    grid.setHeadLabelStep(4);  // narrow columns: every fourth head named
    QCOMPARE(grid.headerData(28, Qt::Horizontal).toString(), QStringLiteral("28"));
    QVERIFY(!grid.headerData(31, Qt::Horizontal).isValid());
    QCOMPARE(grid.headerData(31, Qt::Vertical).toString(), QStringLiteral("31"));
    QCOMPARE(grid.headerData(31, Qt::Horizontal, Qt::ToolTipRole).toString(),
             QStringLiteral("head 31"));
    grid.setLabelled(true);
    QCOMPARE(grid.headerData(11, Qt::Horizontal).toString(), QStringLiteral("H11"));
  }
};

ATTNSCOPE_REGISTER_TEST(FeedDetailTest)

}  // namespace attnscope::dashboard

#include "feed_detail_test.moc"
