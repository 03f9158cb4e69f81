// The live feed's rows: one per request the servers handled, newest first,
// built from Subscribe's FeedEvents. The events -> rows logic, free of Qt's
// item models and widgets (tested without a display); FeedModel shows the
// rows as a table.
#pragma once

#include <QDateTime>
#include <QHash>
#include <QString>
#include <QStringList>
#include <QVector>
#include <QtNumeric>
#include <memory>

#include "attnscope/v1/attnscope.pb.h"

namespace attnscope::dashboard {

// One generated token as the feed reports it (include_token_entropy).
struct FeedToken {
  int index = 0;  // 0 for the first new token
  QString text;
  double entropyNats = 0.0;
  double entropyNormalized = 0.0;
};

// One request. Numbers the server has not reported yet are NaN / -1.
struct FeedRow {
  enum class State { Running, Finished, Failed, Lost };

  // The replica's feed session it came in (unique over all replicas: a
  // (session, requestId) pair names one request).
  quint64 session = 0;
  quint64 requestId = 0;  // the replica's own id (ids restart with a replica)
  QString replica;        // which replica served it: its address ("" if unknown)
  QDateTime time;  // when the request started (or finished, if unseen)
  QString rpc;     // "Analyze", "Generate" or "EvaluateEviction"
  QString model;
  QString promptPreview;  // the server's first 80 characters of the prompt
  int promptTokens = 0;
  QVector<qint64> promptIds;  // the whole prompt's token ids (empty if unknown)
  int generatedTokens = 0;
  State state = State::Running;
  QString status;  // gRPC code name once finished, "OK" on success
  QString errorMessage;
  double health = qQNaN();            // Analyze only
  int sinkCount = -1;                 // Analyze only
  double maxEntropy = qQNaN();        // highest normalized next-token entropy
  QVector<double> entropyNormalized;  // per position: prompt, then generated
  QVector<FeedToken> tokens;          // generated tokens as they streamed
  double durationSeconds = qQNaN();
  // Analyze: the options the client sent (threshold, template, ...).
  attnscope::v1::AnalyzeOptions options;
  // EvaluateEviction: its policies, positions ("cache"/"original", once
  // finished) and, on success, each policy's final perplexity (in order).
  QStringList evictionPolicies;
  QString evictionPositions;
  QVector<double> evictionPerplexity;
  // Analyze that finished: the tokens, every layer's statistics and the
  // summary as the feed carried them; EvaluateEviction that finished: every
  // policy's result (nullptr otherwise), so a dashboard shows the request
  // without running it again.
  std::shared_ptr<const attnscope::v1::RequestFinished> detail;

  bool isEviction() const { return rpc == QLatin1String("EvaluateEviction"); }
  // True when `detail` holds a complete analysis (tokens and summary).
  bool hasDetail() const { return detail && detail->has_tokens() && detail->has_summary(); }
  // True when `detail` holds a finished eviction run (EvictionRun::fromFinished).
  bool hasEvictionRun() const {
    return isEviction() && detail && detail->eviction().results_size() > 0;
  }
};

// Told of each change of FeedRows as it happens, so that a view can follow
// (an item model must announce a removal or an insertion before it happens).
class FeedRowsListener {
 public:
  virtual ~FeedRowsListener() = default;
  // Rows first..last (the oldest) are about to go; then rowsRemoved().
  virtual void aboutToRemoveRows(int first, int last) {}
  virtual void rowsRemoved() {}
  // A row is about to go in at index 0 (the newest); then firstRowInserted().
  virtual void aboutToInsertFirstRow() {}
  virtual void firstRowInserted() {}
  virtual void rowChanged(int row) {}
  // A model name not seen before.
  virtual void newModel(const QString& model) {}
  // droppedEvents() changed.
  virtual void droppedChanged(quint64 dropped) {}
  // A request of the feed ended (row: its index).
  virtual void requestEnded(int row) {}
};

// Rows of FeedRow, newest first, at most maxRows() (the oldest fall off),
// merged from the feeds of every replica behind the dashboard's target: a
// request is named by its replica and that replica's request id.
// apply() validates every event: a malformed or out-of-order one changes
// nothing and returns false with a message naming the request and the field.
class FeedRows {
 public:
  // The bound on generated tokens kept per row.
  static constexpr int kMaxTokensPerRow = 4096;
  // The newest rows that keep FeedRow::detail (tens of KiB each on long
  // prompts); older ones drop it.
  static constexpr int kMaxDetailedRows = 200;

  // `listener` (not owned, may be null) hears of every change.
  explicit FeedRows(FeedRowsListener* listener = nullptr) : m_listener(listener) {}

  // Applies one Subscribe event. Returns false (and sets *error) for an event
  // with no payload, a duplicate start, a token or second finish of an unknown
  // or finished request, or numbers out of range (health outside 0..10,
  // negative counts or durations, non-finite values). Events of requests a
  // dashboard made for itself (origin REQUEST_ORIGIN_DASHBOARD) add no row:
  // they are counted in dashboardRequests() and otherwise ignored.
  // `replica` names the feed it came from ("" for a single server).
  bool apply(const QString& replica, const attnscope::v1::FeedEvent& event,
             QString* error = nullptr);

  // Call after (re)subscribing to `replica`: request ids restart with a new
  // server, and its requests still running on the old connection will never
  // finish, so they are marked Lost. Other replicas' rows are untouched.
  void beginSession(const QString& replica = QString());

  // At least 1; shrinking drops the oldest rows.
  void setMaxRows(int maxRows);
  int maxRows() const { return m_maxRows; }

  int size() const { return static_cast<int>(m_rows.size()); }
  // nullptr when row is out of range.
  const FeedRow* rowAt(int row) const;

  // Requests announced with origin DASHBOARD (detail fetches), not shown.
  quint64 dashboardRequests() const { return m_dashboardRequests; }
  // Events the servers dropped because this subscriber was slow: the sum over
  // replicas of the highest FeedEvent.dropped of each one's current session.
  quint64 droppedEvents() const;
  // The distinct replicas seen, in order of appearance.
  QStringList replicaNames() const { return m_replicas; }
  // The distinct model names seen, in order of appearance.
  QStringList modelNames() const { return m_models; }

 private:
  bool applyStarted(const QString& replica, const attnscope::v1::FeedEvent& event,
                    QString* error);
  bool applyToken(const QString& replica, const attnscope::v1::FeedEvent& event, QString* error);
  bool applyFinished(const QString& replica, const attnscope::v1::FeedEvent& event,
                     QString* error);
  quint64 sessionOf(const QString& replica);
  int findRow(quint64 session, quint64 requestId) const;
  void insertRow(FeedRow row);
  void noteModel(const QString& model);
  void rowChanged(int row);

  FeedRowsListener* m_listener;
  QVector<FeedRow> m_rows;  // newest first
  int m_maxRows = 1000;
  quint64 m_lastSession = 0;
  QHash<QString, quint64> m_sessions;  // replica -> its current session
  QHash<QString, quint64> m_dropped;   // replica -> dropped in that session
  QStringList m_replicas;
  quint64 m_dashboardRequests = 0;
  QStringList m_models;
};

}  // namespace attnscope::dashboard
