// DashboardController without a display or a server (a QCoreApplication):
// the requests it builds, which call each tag is, what a new send cancels,
// head fetches of the shown prompt, waiting rows and the entropy series.
#include <QCoreApplication>
#include <QtTest>

#include "client/models/dashboard_controller.h"
#include "tests/client/event_builders.h"

namespace attnscope::dashboard {
namespace {

namespace v1 = attnscope::v1;
using Call = DashboardController::Call;

// What the controller asked the connection to do, in order.
struct Sent {
  QVector<QPair<quint64, v1::AnalyzeRequest>> analyze;
  QVector<QPair<quint64, v1::GenerateRequest>> generate;
  QVector<QPair<quint64, v1::EvaluateEvictionRequest>> eviction;
  QVector<quint64> cancelled;

  explicit Sent(DashboardController* c) {
    QObject::connect(c, &DashboardController::analyzeRequested,
                     [this](quint64 tag, const v1::AnalyzeRequest& r) { analyze.append({tag, r}); });
    QObject::connect(c, &DashboardController::generateRequested,
                     [this](quint64 tag, const v1::GenerateRequest& r) { generate.append({tag, r}); });
    QObject::connect(c, &DashboardController::evictionRequested,
                     [this](quint64 tag, const v1::EvaluateEvictionRequest& r) {
                       eviction.append({tag, r});
                     });
    QObject::connect(c, &DashboardController::cancelRequested,
                     [this](quint64 tag) { cancelled.append(tag); });
  }
};

PromptInput text(const QString& t) { return PromptInput{t, {}, {}}; }
PromptInput ids(const QVector<qint64>& i) { return PromptInput{QString(), i, {}}; }

ChatInput chat() {
  ChatInput c;
  c.messages = {{QStringLiteral("user"), QStringLiteral("hi")}};
  c.addGenerationPrompt = true;
  c.templateKwargs = QStringLiteral(R"({"enable_thinking":false})");
  return c;
}

}  // namespace

class DashboardControllerTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void analyzeRequestCarriesOnePromptField() {
    v1::AnalyzeOptions options;
    options.set_threshold(0.5);
    options.set_return_attention(true);
    options.add_attention_layers(3);
    const v1::AnalyzeRequest byText =
        analyzeRequest("m", text("The cat"), options, v1::REQUEST_ORIGIN_UNSPECIFIED);
    QCOMPARE(byText.text(), std::string("The cat"));
    QCOMPARE(byText.model(), std::string("m"));
    QVERIFY(!byText.has_ids() && !byText.has_chat());
    QCOMPARE(byText.options().threshold(), 0.5);
    // Heads are fetched one at a time, never with the prompt.
    QVERIFY(!byText.options().return_attention());
    QCOMPARE(byText.options().attention_layers_size(), 0);
    PromptInput both{QStringLiteral("label"), {5, 6}, chat()};
    const v1::AnalyzeRequest byIds =
        analyzeRequest("m", both, options, v1::REQUEST_ORIGIN_DASHBOARD);
    QCOMPARE(byIds.ids().ids_size(), 2);
    QVERIFY(!byIds.has_chat() && byIds.text().empty());
    QCOMPARE(byIds.origin(), v1::REQUEST_ORIGIN_DASHBOARD);
    both.ids.clear();
    const v1::AnalyzeRequest byChat =
        analyzeRequest("m", both, options, v1::REQUEST_ORIGIN_UNSPECIFIED);
    QCOMPARE(byChat.chat().messages_size(), 1);
    QCOMPARE(byChat.chat().messages(0).role(), std::string("user"));
    QVERIFY(byChat.chat().add_generation_prompt());
    QCOMPARE(byChat.chat().template_kwargs_json(), std::string(R"({"enable_thinking":false})"));
    QVERIFY(byChat.text().empty());
  }

  void attentionRequestIsOneFloat32Head() {
    v1::AnalyzeOptions options;
    options.set_threshold(0.25);
    options.set_hidden_state_norms(true);
    options.set_attention_dtype(v1::TENSOR_DTYPE_FLOAT16);
    const v1::AnalyzeRequest r = attentionRequest("m", {1, 2, 3}, options, 4, 7);
    QCOMPARE(r.ids().ids_size(), 3);
    QVERIFY(r.options().return_attention());
    QCOMPARE(r.options().attention_layers_size(), 1);
    QCOMPARE(r.options().attention_layers(0), 4);
    QCOMPARE(r.options().attention_heads(0), 7);
    QCOMPARE(r.options().attention_dtype(), v1::TENSOR_DTYPE_FLOAT32);
    QVERIFY(!r.options().hidden_state_norms());
    QCOMPARE(r.options().threshold(), 0.25);
    QCOMPARE(r.origin(), v1::REQUEST_ORIGIN_DASHBOARD);
  }

  void generateAndEvictionRequests() {
    const v1::GenerateRequest g = generateRequest("m", PromptInput{"x", {}, chat()}, 24);
    QCOMPARE(g.max_new_tokens(), 24);
    QCOMPARE(g.chat().messages_size(), 1);
    QVERIFY(g.text().empty());
    const v1::EvaluateEvictionRequest e =
        evictionRequest("m", PromptInput{"some text", {}, chat()},
                        {QStringLiteral("full"), QStringLiteral("sinks:4+28")}, "cache");
    QCOMPARE(e.text(), std::string("some text"));  // no chat in EvaluateEviction
    QCOMPARE(e.policies_size(), 2);
    QCOMPARE(e.policies(1), std::string("sinks:4+28"));
    QCOMPARE(e.positions(), std::string("cache"));
    QVERIFY(e.include_kept_positions());
    QCOMPARE(evictionRequest("m", ids({9}), {"full"}, "").ids().ids_size(), 1);
  }

  void tagsNameTheCurrentCalls() {
    DashboardController c;
    Sent sent(&c);
    QCOMPARE(c.callOf(0), Call::None);
    const quint64 a = c.analyze("m", text("hi"), {}, v1::REQUEST_ORIGIN_UNSPECIFIED, true);
    const quint64 g = c.generate("m", text("hi"), 8);
    QVERIFY(a != 0 && g != 0 && a != g);
    QCOMPARE(c.callOf(a), Call::Analyze);
    QCOMPARE(c.callOf(g), Call::Generate);
    QCOMPARE(sent.analyze.size(), 1);
    QCOMPARE(sent.analyze[0].first, a);
    QCOMPARE(sent.generate[0].second.max_new_tokens(), 8);
    // The generation runs until its finished signal, in whichever order its
    // prompt's analysis ends.
    QVERIFY(c.generationRunning() && !c.generationEnded());
    QVERIFY(c.analysisOwnsStatus());
    c.finished(a);
    QVERIFY(c.generationRunning());
    c.finished(g);
    QVERIFY(!c.generationRunning() && c.generationEnded());
    // Its "generated" status stays, even when the analysis's first events
    // arrive after the generation's end (CI: "analyzing 11 token(s)…").
    QVERIFY(!c.analysisOwnsStatus());
    QCOMPARE(c.callOf(g), Call::Generate);  // still the shown prompt's
    // Selecting another row: the generation no longer belongs to the view.
    c.beginShowing();
    QCOMPARE(c.callOf(g), Call::None);
    QVERIFY(!c.generationRunning() && !c.generationEnded());
    const quint64 e = c.evaluateEviction("m", text("hi"), {"full"}, "");
    QCOMPARE(c.callOf(e), Call::Eviction);
    QCOMPARE(c.callOf(a), Call::None);  // eviction leaves the prompt view
    c.finished(e);
    QCOMPARE(c.callOf(e), Call::None);
  }

  void aNewAnalysisCancelsOnlyTheDashboardsOwn() {
    DashboardController c;
    Sent sent(&c);
    // The dashboard's own analysis (a selected generation row) is cancelled
    // by the next one; a user's send runs on (it is in the feed).
    const quint64 own = c.analyze("m", ids({1, 2}), {}, v1::REQUEST_ORIGIN_DASHBOARD, false);
    const quint64 users = c.analyze("m", text("mine"), {}, v1::REQUEST_ORIGIN_UNSPECIFIED, true);
    QCOMPARE(sent.cancelled, QVector<quint64>{own});
    QVERIFY(c.analyzeIsUsers());
    c.analyze("m", text("next"), {}, v1::REQUEST_ORIGIN_UNSPECIFIED, true);
    QCOMPARE(sent.cancelled, QVector<quint64>{own});
    QCOMPARE(c.callOf(users), Call::None);
  }

  void headFetchesOfTheShownPrompt() {
    DashboardController c;
    Sent sent(&c);
    QCOMPARE(c.fetchHead(0, 0), quint64(0));  // nothing shown
    v1::AnalyzeOptions options;
    options.set_threshold(0.5);
    c.analyze("m", ids({7, 8, 9}), options, v1::REQUEST_ORIGIN_DASHBOARD, false);
    QCOMPARE(c.shownIds(), (QVector<qint64>{7, 8, 9}));
    const quint64 first = c.fetchHead(2, 3);
    QCOMPARE(c.callOf(first), Call::Attention);
    QCOMPARE(c.fetchHead(2, 3), quint64(0));  // already on its way
    const v1::AnalyzeRequest& r = sent.analyze.last().second;
    QCOMPARE(r.ids().ids_size(), 3);
    QCOMPARE(r.options().threshold(), 0.5);  // the shown prompt's own options
    QCOMPARE(r.options().attention_heads(0), 3);
    const quint64 second = c.fetchHead(2, 4);  // moving on cancels the first
    QVERIFY(sent.cancelled.contains(first));
    QCOMPARE(c.fetchedHead(), qMakePair(2, 4));
    QCOMPARE(c.headFetches(), 2);
    c.finished(second);
    QCOMPARE(c.callOf(second), Call::None);
    // Leaving the prompt cancels the dashboard's analysis and fetch.
    const quint64 third = c.fetchHead(1, 1);
    c.leaveShown();
    QVERIFY(sent.cancelled.contains(third));
    QCOMPARE(c.callOf(third), Call::None);
  }

  void aChatIsShownAsAChatOnlyWithoutIds() {
    DashboardController c;
    c.analyze("m", PromptInput{"label", {}, chat()}, {}, v1::REQUEST_ORIGIN_UNSPECIFIED, true);
    QCOMPARE(c.shownChat().messages.size(), 1);
    c.analyze("m", PromptInput{"label", {4}, chat()}, {}, v1::REQUEST_ORIGIN_UNSPECIFIED, true);
    QVERIFY(c.shownChat().isEmpty());
  }

  void waitingRows() {
    DashboardController c;
    QVERIFY(!c.isWaitingFor(1, 5));
    c.waitFor(1, 5);
    QVERIFY(c.isWaitingFor(1, 5));
    QVERIFY(!c.isWaitingFor(2, 5));
    c.beginShowing();
    QVERIFY(!c.isWaitingFor(1, 5));
  }

  void entropyOfPromptThenGeneratedTokens() {
    DashboardController c;
    PromptAnalysis analysis;
    QVERIFY(analysis.addEvent(testing::tokens({"a", "b"})));
    QVERIFY(analysis.addEvent(testing::layer(0, {0.5})));
    QVERIFY(analysis.addEvent(testing::summary(2, 8.0, {}, {}, {0.2, 0.7})));
    QCOMPARE(c.entropy(analysis).points().size(), 2);
    FeedToken t;
    t.index = 0;
    t.text = QStringLiteral(" c");
    t.entropyNormalized = 0.4;
    FeedToken u = t;
    u.index = 1;
    u.text = QStringLiteral(" d");
    // The first new token was drawn after the last prompt token (it replaces
    // that point's entropy); the second adds a point.
    c.setFeedTokens({t, u}, 2);
    const EntropySeries series = c.entropy(analysis);
    QCOMPARE(series.points().size(), 3);
    QCOMPARE(series.promptLength(), 2);
    QVERIFY(series.points().last().generated);
    c.beginShowing();
    QCOMPARE(c.entropy(analysis).points().size(), 2);
  }
};

}  // namespace attnscope::dashboard

int main(int argc, char** argv) {
  QCoreApplication app(argc, argv);  // no display, no QGuiApplication
  attnscope::dashboard::DashboardControllerTest test;
  return QTest::qExec(&test, argc, argv);
}

#include "dashboard_controller_test.moc"
