#include "client/models/token_labels.h"

#include <cmath>

namespace attnscope::dashboard {
namespace {

QString cut(const QString& text, int maxChars) {
  if (maxChars <= 1 || text.size() <= maxChars) return text;
  return text.left(maxChars - 1) + QChar(0x2026);
}

QString byteLabel(unsigned char byte) {
  return QStringLiteral("<0x%1>").arg(
      QString::number(byte, 16).toUpper().rightJustified(2, QLatin1Char('0')));
}

// The length of the valid UTF-8 sequence starting at bytes[i], or 0 (RFC
// 3629: no overlong forms, no surrogates, nothing above U+10FFFF).
int utf8SequenceLength(const std::string& bytes, size_t i) {
  const auto at = [&](size_t k) { return static_cast<unsigned char>(bytes[k]); };
  const unsigned char lead = at(i);
  if (lead < 0x80) return 1;
  int length = 0;
  unsigned char low = 0x80, high = 0xBF;  // range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
  } else {
    return 0;
  }
  if (i + length > bytes.size()) return 0;
  if (at(i + 1) < low || at(i + 1) > high) return 0;
  for (int k = 2; k < length; ++k) {
    if ((at(i + k) & 0xC0) != 0x80) return 0;
  }
  return length;
}

// Parses "<0xNN>" at text[i]; -1 if there is none.
int byteFragmentAt(const QString& text, qsizetype i) {
  if (i + 6 > text.size() || text.mid(i, 3) != QLatin1String("<0x") ||
      text[i + 5] != QLatin1Char('>')) {
    return -1;
  }
  bool ok = false;
  const int value = text.mid(i + 3, 2).toInt(&ok, 16);
  return ok ? value : -1;
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
      out += c.unicode() < 0x100 ? byteLabel(static_cast<unsigned char>(c.unicode()))
                                 : QString(QChar(0xFFFD));
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

QString breakLongRuns(const QString& text, int maxRun) {
  if (maxRun < 1 || text.size() <= maxRun) return text;
  const QChar zeroWidthSpace(0x200B);
  QString out;
  out.reserve(text.size() + text.size() / maxRun);
  int run = 0;
  for (qsizetype i = 0; i < text.size(); ++i) {
    const QChar c = text[i];
    if (c.isSpace() || c == zeroWidthSpace) {
      run = 0;
    } else if (run >= maxRun && !c.isLowSurrogate()) {
      out += zeroWidthSpace;
      run = 0;
    }
    out += c;
    if (!c.isSpace() && c != zeroWidthSpace && !c.isLowSurrogate()) ++run;
  }
  return out;
}

QString readableBytes(const std::string& bytes) {
  QString out;
  size_t i = 0;
  while (i < bytes.size()) {
    const int length = utf8SequenceLength(bytes, i);
    if (length == 0) {
      out += byteLabel(static_cast<unsigned char>(bytes[i]));
      ++i;
    } else {
      out += QString::fromUtf8(bytes.data() + i, length);
      i += static_cast<size_t>(length);
    }
  }
  return out;
}

QString joinTokenTexts(const QStringList& texts) {
  const QString joined = texts.join(QString());
  QString out;
  std::string pending;  // bytes of the current run of fragments
  qsizetype i = 0;
  while (i < joined.size()) {
    const int byte = byteFragmentAt(joined, i);
    if (byte >= 0) {
      pending.push_back(static_cast<char>(byte));
      i += 6;
      continue;
    }
    out += readableBytes(pending);
    pending.clear();
    out += joined[i];
    ++i;
  }
  out += readableBytes(pending);
  return out;
}

int tokenLabelStep(int count, double pixels, double labelPixels) {
  if (count <= 0 || !(labelPixels > 0.0)) return 1;
  if (!(pixels > 0.0)) return count;
  const double perToken = pixels / count;
  for (long long decade = 1; decade <= count; decade *= 10) {
    for (const long long m : {1, 2, 5}) {
      const long long step = m * decade;
      if (step >= count) return count;
      if (double(step) * perToken >= labelPixels) return static_cast<int>(step);
    }
  }
  return count;
}

}  // namespace attnscope::dashboard
