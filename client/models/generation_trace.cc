#include "client/models/generation_trace.h"

#include <cmath>

#include "client/models/model_error.h"
#include "client/models/token_labels.h"

namespace attnscope::dashboard {
namespace {

namespace v1 = attnscope::v1;

}  // namespace

bool GenerationTrace::addEvent(const v1::GenerateEvent& event, QString* error) {
  if (m_summary.has_value()) return fail(error, QStringLiteral("generate event after the summary"));
  switch (event.event_case()) {
    case v1::GenerateEvent::kPrompt: {
      if (m_hasPrompt) return fail(error, QStringLiteral("generate: duplicate prompt event"));
      if (event.prompt().ids_size() == 0)
        return fail(error, QStringLiteral("generate: empty prompt"));
      m_hasPrompt = true;
      for (int i = 0; i < event.prompt().ids_size(); ++i) {
        m_promptTexts << (i < event.prompt().texts_size()
                              ? QString::fromStdString(event.prompt().texts(i))
                              : QStringLiteral("#%1").arg(event.prompt().ids(i)));
      }
      return true;
    }
    case v1::GenerateEvent::kToken:
      return addToken(event.token(), error);
    case v1::GenerateEvent::kSummary:
      if (!m_hasPrompt) return fail(error, QStringLiteral("generate: summary before the prompt"));
      m_summary = event.summary();
      return true;
    case v1::GenerateEvent::EVENT_NOT_SET:
      break;
  }
  return fail(error, QStringLiteral("generate event has no payload"));
}

bool GenerationTrace::addToken(const v1::GeneratedToken& token, QString* error) {
  if (!m_hasPrompt)
    return fail(error, QStringLiteral("generated token %1 before the prompt").arg(token.index()));
  const int expectedIndex = static_cast<int>(m_tokens.size());
  const int expectedPosition = static_cast<int>(m_promptTexts.size()) + expectedIndex;
  if (token.index() != expectedIndex || token.position() != expectedPosition) {
    return fail(error, QStringLiteral("generated token index %1 at position %2, expected %3 at %4")
                           .arg(token.index())
                           .arg(token.position())
                           .arg(expectedIndex)
                           .arg(expectedPosition));
  }
  if (!std::isfinite(token.entropy_nats()) || !std::isfinite(token.entropy_normalized())) {
    return fail(error,
                QStringLiteral("generated token %1: entropy is not finite").arg(token.index()));
  }
  m_tokens.append(token);
  return true;
}

void GenerationTrace::clear() {
  m_hasPrompt = false;
  m_promptTexts.clear();
  m_tokens.clear();
  m_summary.reset();
}

QString GenerationTrace::text() const {
  // The summary's text is the tokenizer's decoding, with U+FFFD where it
  // stops inside a character; the tokens' own texts keep those bytes.
  if (m_summary.has_value()) {
    const QString decoded = QString::fromStdString(m_summary->text());
    if (!decoded.contains(QChar(0xFFFD))) return decoded;
  }
  QStringList texts;
  for (const v1::GeneratedToken& t : m_tokens) texts << QString::fromStdString(t.text());
  return joinTokenTexts(texts);
}

const v1::GenerateSummary* GenerationTrace::summary() const {
  return m_summary.has_value() ? &*m_summary : nullptr;
}

}  // namespace attnscope::dashboard
