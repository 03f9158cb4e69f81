// How a token reads on screen: GPT-2 tokens carry leading spaces and
// newlines that would be invisible in a table header or an axis label.
#pragma once

#include <QString>

namespace attnscope::dashboard {

// The token text with whitespace made visible: a space becomes '·', a newline
// '⏎', a tab '→', other control characters '�'. An empty text becomes '∅'.
// Longer than maxChars (> 1): cut and ended with '…'.
QString visibleTokenText(const QString& text, int maxChars = 12);

// "position text", e.g. "3 ·cat", for row headers and tooltips.
QString positionedTokenLabel(int position, const QString& text, int maxChars = 12);

// A one-line preview of a prompt: newlines shown as '⏎', at most maxChars.
QString promptPreviewLine(const QString& text, int maxChars = 80);

}  // namespace attnscope::dashboard
