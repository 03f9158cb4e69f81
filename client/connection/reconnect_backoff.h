// The delays between reconnection attempts: exponential, capped.
#pragma once

namespace attnscope::dashboard {

// Attempt n (0-based) after a failure waits initialMs * 2^n, at most maxMs.
// reset() after a successful connection starts again from initialMs.
class ReconnectBackoff {
 public:
  // initialMs >= 1 and maxMs >= initialMs (smaller values are raised).
  ReconnectBackoff(int initialMs, int maxMs);

  // The delay before the next attempt; counts the attempt.
  int nextDelayMs();
  // Failed attempts since the last reset.
  int attempts() const { return m_attempts; }
  void reset() { m_attempts = 0; }

 private:
  int m_initialMs;
  int m_maxMs;
  int m_attempts = 0;
};

}  // namespace attnscope::dashboard
