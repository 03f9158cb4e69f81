// What the dashboard tests that open the real window share: connection
// options that reconnect within a second, and QSettings kept in a
// temporary directory (never the user's).
#pragma once

#include <QCoreApplication>
#include <QSettings>
#include <QString>
#include <QTemporaryDir>

#include "client/connection/connection.h"

namespace attnscope::dashboard::testing {

// Back-off from 100 ms to 1 s (the window's default caps at 8 s), each
// attempt waiting up to probeTimeoutMs for the server.
inline ConnectionOptions fastReconnect(const ConnectionSecurity& security = {},
                                       int probeTimeoutMs = 2000) {
  ConnectionOptions options;
  options.initialBackoffMs = 100;
  options.maxBackoffMs = 1000;
  options.probeTimeoutMs = probeTimeoutMs;
  options.security = security;
  return options;
}

// This binary's QSettings (organisation "attnscope-test", `application`)
// live in `dir`. False when `dir` could not be made.
inline bool useTestSettings(const QTemporaryDir& dir, const QString& application) {
  if (!dir.isValid()) return false;
  QCoreApplication::setOrganizationName(QStringLiteral("attnscope-test"));
  QCoreApplication::setApplicationName(application);
  QSettings::setPath(QSettings::NativeFormat, QSettings::UserScope, dir.path());
  return true;
}

}  // namespace attnscope::dashboard::testing
