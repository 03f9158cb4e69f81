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

// The object's "chat_template_kwargs" with its "tools" added, as compact
// JSON ("" for none).
bool parseTemplateKwargs(const QJsonObject& object, QString* kwargs, QString* error) {
  QJsonObject variables;
  const QJsonValue given = object.value(QStringLiteral("chat_template_kwargs"));
  if (!given.isUndefined()) {
    if (!given.isObject()) {
      return fail(error, QStringLiteral("chat JSON: \"chat_template_kwargs\" is not an object of "
                                        "template variables (e.g. {\"enable_thinking\": false})"));
    }
    variables = given.toObject();
  }
  for (const char* own : {"messages", "add_generation_prompt"}) {
    if (variables.contains(QLatin1String(own))) {
      return fail(error, QStringLiteral("chat JSON: \"%1\" is the request's own, not a template "
                                        "variable (use the checkbox for add_generation_prompt)")
                             .arg(QLatin1String(own)));
    }
  }
  const QJsonValue tools = object.value(QStringLiteral("tools"));
  if (!tools.isUndefined()) {
    if (variables.contains(QStringLiteral("tools"))) {
      return fail(error, QStringLiteral("chat JSON: \"tools\" given twice (beside the messages "
                                        "and in chat_template_kwargs); keep one"));
    }
    variables.insert(QStringLiteral("tools"), tools);
  }
  if (variables.contains(QStringLiteral("tools")) &&
      !variables.value(QStringLiteral("tools")).isArray()) {
    return fail(error, QStringLiteral("chat JSON: \"tools\" is not an array of tool definitions"));
  }
  *kwargs = variables.isEmpty()
                ? QString()
                : QString::fromUtf8(QJsonDocument(variables).toJson(QJsonDocument::Compact));
  return true;
}

bool parseJsonChat(const QString& text, QVector<ChatMessageInput>* messages, QString* error,
                   QString* templateKwargs) {
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
    QString kwargs;
    if (!parseTemplateKwargs(document.object(), &kwargs, error)) return false;
    if (templateKwargs != nullptr) *templateKwargs = kwargs;
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

bool parseChat(const QString& text, QVector<ChatMessageInput>* messages, QString* error,
               QString* templateKwargs) {
  messages->clear();
  if (templateKwargs != nullptr) templateKwargs->clear();
  const QString trimmed = text.trimmed();
  const bool ok = trimmed.startsWith(QLatin1Char('[')) || trimmed.startsWith(QLatin1Char('{'))
                      ? parseJsonChat(trimmed, messages, error, templateKwargs)
                      : parseLineChat(text, messages, error);
  if (!ok) {
    messages->clear();
    if (templateKwargs != nullptr) templateKwargs->clear();
  }
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
