#include "client/models/chat_input.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>
#include <QStringList>

#include "client/models/model_error.h"

namespace attnscope::dashboard {
namespace {

const char kFormats[] =
    "write 'user: ...' lines (roles system, user, assistant, tool, developer) or paste JSON "
    "[{\"role\": ..., \"content\": ...}]";

bool parseJsonChat(const QString& text, QVector<ChatMessageInput>* messages, QString* error) {
  QJsonParseError parse;
  const QJsonDocument document = QJsonDocument::fromJson(text.toUtf8(), &parse);
  if (parse.error != QJsonParseError::NoError) {
    return fail(error, QStringLiteral("chat JSON at byte %1: %2")
                           .arg(parse.offset)
                           .arg(parse.errorString()));
  }
  QJsonArray array = document.array();
  if (document.isObject()) {
    const QJsonValue inner = document.object().value(QStringLiteral("messages"));
    if (!inner.isArray()) {
      return fail(error, QStringLiteral("chat JSON: an object needs a \"messages\" array"));
    }
    array = inner.toArray();
  }
  if (array.isEmpty()) return fail(error, QStringLiteral("chat JSON: no messages"));
  for (int i = 0; i < array.size(); ++i) {
    const QString where = QStringLiteral("chat JSON message %1").arg(i + 1);
    if (!array[i].isObject()) return fail(error, where + QStringLiteral(": not an object"));
    const QJsonObject m = array[i].toObject();
    const QJsonValue role = m.value(QStringLiteral("role"));
    const QJsonValue content = m.value(QStringLiteral("content"));
    if (!role.isString() || role.toString().trimmed().isEmpty()) {
      return fail(error, where + QStringLiteral(": \"role\" is missing or not a non-empty string"));
    }
    if (!content.isString() && !content.isNull() && !content.isUndefined()) {
      return fail(error, where + QStringLiteral(": \"content\" is not a string"));
    }
    messages->append({role.toString().trimmed(), content.toString()});
  }
  return true;
}

bool parseLineChat(const QString& text, QVector<ChatMessageInput>* messages, QString* error) {
  static const QRegularExpression kRoleLine(
      QStringLiteral(R"(^\s*(system|user|assistant|tool|developer)\s*:[ \t]?(.*)$)"),
      QRegularExpression::CaseInsensitiveOption);
  const QStringList lines = text.split(QLatin1Char('\n'));
  QStringList content;
  const auto flush = [&] {
    if (messages->isEmpty()) return;
    while (!content.isEmpty() && content.last().trimmed().isEmpty()) content.removeLast();
    messages->last().content = content.join(QLatin1Char('\n'));
    content.clear();
  };
  for (int i = 0; i < lines.size(); ++i) {
    QString line = lines[i];
    if (line.endsWith(QLatin1Char('\r'))) line.chop(1);
    const QRegularExpressionMatch match = kRoleLine.match(line);
    if (match.hasMatch()) {
      flush();
      messages->append({match.captured(1).toLower(), QString()});
      content << match.captured(2);
      continue;
    }
    if (messages->isEmpty()) {
      if (line.trimmed().isEmpty()) continue;
      return fail(error, QStringLiteral("chat line %1 ('%2'): a message starts with a role; %3")
                             .arg(i + 1)
                             .arg(line.trimmed().left(30), QString::fromLatin1(kFormats)));
    }
    content << line;
  }
  flush();
  if (messages->isEmpty()) {
    return fail(error, QStringLiteral("the chat is empty: %1").arg(QString::fromLatin1(kFormats)));
  }
  return true;
}

}  // namespace

bool parseChat(const QString& text, QVector<ChatMessageInput>* messages, QString* error) {
  messages->clear();
  const QString trimmed = text.trimmed();
  const bool ok = trimmed.startsWith(QLatin1Char('[')) || trimmed.startsWith(QLatin1Char('{'))
                      ? parseJsonChat(trimmed, messages, error)
                      : parseLineChat(text, messages, error);
  if (!ok) messages->clear();
  return ok;
}

QString chatPreview(const QVector<ChatMessageInput>& messages, int maxContent) {
  QStringList parts;
  for (const ChatMessageInput& m : messages) {
    QString content = m.content.simplified();
    if (content.size() > maxContent) content = content.left(maxContent) + QStringLiteral("…");
    parts << QStringLiteral("%1: %2").arg(m.role, content);
  }
  return parts.join(QStringLiteral(" · "));
}

}  // namespace attnscope::dashboard
