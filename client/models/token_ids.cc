#include "client/models/token_ids.h"

#include <QRegularExpression>
#include <QStringList>

namespace attnscope::dashboard {

bool parseTokenIds(const QString& text, QVector<qint64>* ids, QString* error, qint64 vocabSize) {
  ids->clear();
  QString body = text.trimmed();
  if (body.startsWith(QLatin1Char('[')) && body.endsWith(QLatin1Char(']'))) {
    body = body.mid(1, body.size() - 2).trimmed();
  }
  if (body.isEmpty()) {
    *error = QStringLiteral("no token ids: type ids separated by commas or spaces, e.g. 464, 3797");
    return false;
  }
  // Commas separate entries (an empty one is an error); whitespace alone
  // also separates.
  static const QRegularExpression kSpaces(QStringLiteral("\\s+"));
  const QStringList fields = body.split(QLatin1Char(','));
  int position = 0;
  for (const QString& field : fields) {
    const QStringList parts = field.trimmed().split(kSpaces, Qt::SkipEmptyParts);
    if (parts.isEmpty()) {
      *error = QStringLiteral("token id %1 is empty (two commas in a row?)").arg(position + 1);
      ids->clear();
      return false;
    }
    for (const QString& part : parts) {
      ++position;
      bool ok = false;
      const qint64 id = part.toLongLong(&ok);
      if (!ok || id < 0) {
        *error = QStringLiteral("token id %1 is '%2': ids are non-negative integers")
                     .arg(position)
                     .arg(part);
        ids->clear();
        return false;
      }
      if (vocabSize > 0 && id >= vocabSize) {
        *error = QStringLiteral("token id %1 is %2, outside the vocabulary [0, %3)")
                     .arg(position)
                     .arg(id)
                     .arg(vocabSize);
        ids->clear();
        return false;
      }
      ids->append(id);
    }
  }
  return true;
}

}  // namespace attnscope::dashboard
