#include "client/connection/reconnect_backoff.h"

#include <algorithm>

namespace attnscope::dashboard {

ReconnectBackoff::ReconnectBackoff(int initialMs, int maxMs)
    : m_initialMs(std::max(1, initialMs)), m_maxMs(std::max(m_initialMs, maxMs)) {}

int ReconnectBackoff::nextDelayMs() {
  long long delay = m_initialMs;
  // Doubling stops at the cap, so this never overflows.
  for (int i = 0; i < m_attempts && delay < m_maxMs; ++i) delay *= 2;
  ++m_attempts;
  return static_cast<int>(std::min<long long>(delay, m_maxMs));
}

}  // namespace attnscope::dashboard
