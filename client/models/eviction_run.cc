#include "client/models/eviction_run.h"

#include <cmath>

namespace attnscope::dashboard {
namespace {

// S and R of "sinks:S+R" / "window:R"; false for other policies.
bool sinkSizes(const QString& name, qint64* sinks, qint64* recent) {
  if (name.startsWith(QStringLiteral("window:"))) {
    *sinks = 0;
    bool ok = false;
    *recent = name.mid(7).toLongLong(&ok);
    return ok;
  }
  if (!name.startsWith(QStringLiteral("sinks:"))) return false;
  const QStringList parts = name.mid(6).split(QLatin1Char('+'));
  if (parts.size() != 2) return false;
  bool a = false, b = false;
  *sinks = parts[0].toLongLong(&a);
  *recent = parts[1].toLongLong(&b);
  return a && b;
}

}  // namespace

bool EvictionRun::isSinkPolicy(const QString& name) {
  qint64 s = 0, r = 0;
  return name == QStringLiteral("full") || sinkSizes(name, &s, &r);
}

QVector<qint64> EvictionRun::sinkKept(const QString& name, int step) {
  QVector<qint64> kept;
  qint64 s = 0, r = 0;
  const qint64 cached = step + 1;
  if (name == QStringLiteral("full") || !sinkSizes(name, &s, &r) || cached <= s + r) {
    for (qint64 j = 0; j < cached; ++j) kept << j;
    return kept;
  }
  for (qint64 j = 0; j < s; ++j) kept << j;
  for (qint64 j = cached - r; j < cached; ++j) kept << j;
  return kept;
}

EvictionRun::Policy& EvictionRun::policy(int index, const QString& name) {
  while (m_policies.size() <= index) m_policies.append(Policy{});
  Policy& p = m_policies[index];
  if (p.name.isEmpty()) p.name = name;
  return p;
}

void EvictionRun::addEvent(const v1::EvaluateEvictionEvent& event) {
  if (event.has_text()) m_textTokens = event.text().ids_size();
  if (event.has_progress()) {
    const v1::EvictionProgress& e = event.progress();
    Policy& p = policy(e.policy_index(), QString::fromStdString(e.policy()));
    m_stepsTotal = e.steps_total();
    p.curve.append(QPointF(e.steps_done(), e.running_perplexity()));
    if (isSinkPolicy(p.name) && e.kept_positions_size() > 0) {
      p.kept.append(QVector<qint64>(e.kept_positions().begin(), e.kept_positions().end()));
    }
  }
  if (event.has_summary()) {
    const auto& results = event.summary().results();
    for (int i = 0; i < results.size(); ++i) {
      Policy& p = policy(i, QString::fromStdString(results[i].policy()));
      p.perplexity = results[i].perplexity();
      p.done = true;
    }
  }
}

EvictionRun EvictionRun::fromFinished(const v1::RequestFinished& finished) {
  EvictionRun run;
  run.m_textTokens = finished.prompt_tokens();
  const auto& results = finished.eviction().results();
  for (int i = 0; i < results.size(); ++i) {
    Policy& p = run.policy(i, QString::fromStdString(results[i].policy()));
    double sum = 0;
    for (int t = 0; t < results[i].nll_size(); ++t) {
      sum += results[i].nll(t);
      p.curve.append(QPointF(t + 1, std::exp(sum / (t + 1))));
      if (isSinkPolicy(p.name)) p.kept.append(sinkKept(p.name, t));
    }
    p.perplexity = results[i].perplexity();
    p.done = true;
    run.m_stepsTotal = results[i].steps();
  }
  return run;
}

}  // namespace attnscope::dashboard
