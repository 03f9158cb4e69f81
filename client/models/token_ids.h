// Token ids typed by hand, for checkpoints that have no tokenizer.
#pragma once

#include <QString>
#include <QVector>

namespace attnscope::dashboard {

// Parses ids separated by commas and/or whitespace ("50256, 464 3797",
// "[1, 2, 3]" with optional brackets). Every id must be a non-negative
// integer (within vocabSize when it is > 0). Returns false with *error naming
// the first bad entry and its position (1-based) for an empty list, an empty
// entry ("1,,2"), a non-number or an id out of range.
bool parseTokenIds(const QString& text, QVector<qint64>* ids, QString* error, qint64 vocabSize = 0);

}  // namespace attnscope::dashboard
