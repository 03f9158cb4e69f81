#include "client/models/token_labels.h"

namespace attnscope::dashboard {
namespace {

QString cut(const QString& text, int maxChars) {
  if (maxChars <= 1 || text.size() <= maxChars) return text;
  return text.left(maxChars - 1) + QChar(0x2026);
}

}  // namespace

QString visibleTokenText(const QString& text, int maxChars) {
  if (text.isEmpty()) return QString(QChar(0x2205));
  QString out;
  out.reserve(text.size());
  for (const QChar c : text) {
    if (c == QLatin1Char(' ')) {
      out += QChar(0x00B7);
    } else if (c == QLatin1Char('\n')) {
      out += QChar(0x23CE);
    } else if (c == QLatin1Char('\t')) {
      out += QChar(0x2192);
    } else if (c.category() == QChar::Other_Control) {
      out += QChar(0xFFFD);
    } else {
      out += c;
    }
  }
  return cut(out, maxChars);
}

QString positionedTokenLabel(int position, const QString& text, int maxChars) {
  return QString::number(position) + QLatin1Char(' ') + visibleTokenText(text, maxChars);
}

QString promptPreviewLine(const QString& text, int maxChars) {
  QString line = text;
  line.replace(QLatin1Char('\n'), QChar(0x23CE));
  line.replace(QLatin1Char('\r'), QString());
  line.replace(QLatin1Char('\t'), QLatin1Char(' '));
  return cut(line, maxChars);
}

}  // namespace attnscope::dashboard
