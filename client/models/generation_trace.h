// One Generate stream assembled: the prompt tokens, each generated token with
// its entropy, and the summary.
#pragma once

#include <QString>
#include <QStringList>
#include <QVector>
#include <optional>

#include "attnscope/v1/attnscope.pb.h"

namespace attnscope::dashboard {

// Accepts events in Generate's order: one `prompt`, `token`s with index
// 0, 1, 2, ... at positions T, T+1, ..., one `summary`. Anything else (a token
// before the prompt, a skipped or repeated index, a wrong position, a
// non-finite entropy, a second prompt or summary, an event after the summary)
// is rejected with a message and changes nothing.
class GenerationTrace {
 public:
  bool addEvent(const attnscope::v1::GenerateEvent& event, QString* error = nullptr);
  void clear();

  bool hasPrompt() const { return m_hasPrompt; }
  QStringList promptTexts() const { return m_promptTexts; }
  const QVector<attnscope::v1::GeneratedToken>& tokens() const { return m_tokens; }
  // The generated text so far: the summary's once it arrived, unless that
  // has U+FFFD (a character cut between tokens, or bytes that are no
  // character); else the tokens' texts joined (joinTokenTexts: byte
  // fragments as characters where they make one, else as <0xNN>).
  QString text() const;
  const attnscope::v1::GenerateSummary* summary() const;

 private:
  bool addToken(const attnscope::v1::GeneratedToken& token, QString* error);

  bool m_hasPrompt = false;
  QStringList m_promptTexts;
  QVector<attnscope::v1::GeneratedToken> m_tokens;
  std::optional<attnscope::v1::GenerateSummary> m_summary;
};

}  // namespace attnscope::dashboard
