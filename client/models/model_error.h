// The dashboard models' way of refusing input: the reason goes to *error
// (when the caller asked for it) and the call returns false.
#pragma once

#include <QString>

namespace attnscope::dashboard {

inline bool fail(QString* error, const QString& message) {
  if (error != nullptr) *error = message;
  return false;
}

}  // namespace attnscope::dashboard
