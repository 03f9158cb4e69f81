// How a token reads on screen: GPT-2 tokens carry leading spaces and
// newlines that would be invisible in a table header or an axis label, and
// byte-level tokens can be a lone byte of a character.
#pragma once

#include <QString>
#include <QStringList>
#include <string>

namespace attnscope::dashboard {

// The token text with whitespace made visible: a space becomes '·', a newline
// '⏎', a tab '→', other control characters their byte as "<0xNN>" (as the
// server spells byte fragments). An empty text becomes '∅'. Longer than
// maxChars (> 1): cut and ended with '…'.
QString visibleTokenText(const QString& text, int maxChars = 12);

// "position text", e.g. "3 ·cat", for row headers and tooltips.
QString positionedTokenLabel(int position, const QString& text, int maxChars = 12);

// A one-line preview of a prompt: newlines shown as '⏎', at most maxChars.
QString promptPreviewLine(const QString& text, int maxChars = 80);

// `text` with a zero-width space (U+200B, a line-break opportunity) after
// every maxRun characters of a run without spaces (paths, URLs, generated
// token strings), so that a wrapping label never needs more width than
// maxRun characters. Runs up to maxRun, and maxRun < 1, leave it as it is;
// a surrogate pair is never split.
QString breakLongRuns(const QString& text, int maxRun = 24);

// Bytes that need not be UTF-8 (a decoded prompt, a token's bytes) as text:
// valid UTF-8 sequences as their characters, every other byte (a lone or
// incomplete sequence's) as "<0xNN>" with upper-case hex, never U+FFFD.
QString readableBytes(const std::string& bytes);

// Token texts joined into the text they spell: a run of "<0xNN>" fragments
// (tokens that are single bytes of a character) is turned back into bytes
// first, so that <0xE2><0x80><0x94> reads as '—'; bytes that still do not
// form a character stay "<0xNN>". Other text is kept as it is.
QString joinTokenTexts(const QStringList& texts);

// The label step for `count` evenly spaced tokens along `pixels` pixels when a
// label needs `labelPixels` across the axis (a rotated label: the line
// height): the smallest of 1, 2, 5, 10, 20, 50, ... at which every step-th
// token's label has room. 1 when count <= 0 or labelPixels <= 0; NaN or
// non-positive pixels: count (one label).
int tokenLabelStep(int count, double pixels, double labelPixels);

}  // namespace attnscope::dashboard
