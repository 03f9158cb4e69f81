// A conversation typed into the dashboard's send box, for the server's
// Conversation prompt (rendered with the model's chat template).
#pragma once

#include <QString>
#include <QVector>

namespace attnscope::dashboard {

struct ChatMessageInput {
  QString role;
  QString content;

  bool operator==(const ChatMessageInput& other) const {
    return role == other.role && content == other.content;
  }
};

struct ChatInput {
  QVector<ChatMessageInput> messages;
  bool addGenerationPrompt = false;  // end with the header of the assistant's reply
  // Extra template variables as compact JSON ({"enable_thinking":false}),
  // from the JSON form's "chat_template_kwargs" and "tools"; empty: none.
  QString templateKwargs;

  bool isEmpty() const { return messages.isEmpty(); }
};

// Parses a conversation in one of two forms:
//  - lines: a message starts at a line "role: content" whose role is system,
//    user, assistant, tool or developer (any case; stored lower-case); the
//    lines after it, up to the next such line, continue its content;
//    trailing blank lines are dropped;
//  - JSON as Hugging Face writes it: [{"role": ..., "content": ...}, ...] or
//    {"messages": [...]} (any role; content a string or null), the object
//    optionally with "chat_template_kwargs" (an object of template
//    variables, e.g. {"enable_thinking": false}) and "tools" (an array), as
//    vLLM's request body has them: those go to *templateKwargs (compact
//    JSON; empty when there are none) when it is given.
// Returns false with *error naming the line or the message (1-based) and
// what to write instead; *messages is then left empty.
bool parseChat(const QString& text, QVector<ChatMessageInput>* messages, QString* error,
               QString* templateKwargs = nullptr);

// One line for labels: "system: Be brief · user: Name a colour", each content
// cut at maxContent characters.
QString chatPreview(const QVector<ChatMessageInput>& messages, int maxContent = 40);

}  // namespace attnscope::dashboard
