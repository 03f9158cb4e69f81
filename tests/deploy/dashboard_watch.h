// The real attnscope dashboard (MainWindow, offscreen) inside a GoogleTest
// of the deploy suite, watching a target of several replicas: small verbs to
// wait on what it shows (per-replica feed state, which replicas served the
// rows of its feed) and to send from its send box.
#pragma once

#include <functional>
#include <memory>
#include <set>
#include <string>

namespace attnscope::deploy::testing {

class DashboardWatch {
 public:
  // Creates the QApplication (platform offscreen, settings in a temporary
  // directory) and a MainWindow connected to `target`, shown at 1600 x 1000.
  explicit DashboardWatch(const std::string& target);
  ~DashboardWatch();

  // Runs the GUI's event loop until `done` holds (checked every few ms) or
  // timeoutMs passes; returns whether it held.
  bool WaitUntil(const std::function<bool()>& done, int timeoutMs);

  // The replicas the target resolved to (labels: "127.0.0.1:PORT").
  std::set<std::string> Replicas() const;
  // Whether every replica's feed is connected (overall state Connected).
  bool AllConnected() const;
  // The connection indicator's state name for one replica ("Connected",
  // "Reconnecting", ...) and the indicator's text.
  std::string ReplicaState(const std::string& replica) const;
  std::string IndicatorText() const;
  // Subscriptions of one replica's feed: 1, +1 per reconnect.
  int ReplicaSubscriptions(const std::string& replica) const;

  // Replicas with at least one finished feed row (prefix: only rows whose
  // prompt preview starts with it).
  std::set<std::string> ReplicasWithFinishedRows(const std::string& prefix = "") const;
  // The highest feed session among `replica`'s rows (0: none); a session is
  // new after each reconnect.
  unsigned long long LatestSession(const std::string& replica) const;
  // Rows of `replica` in session `session` or later that finished / still
  // run / were lost with the connection.
  int Rows(const std::string& replica, unsigned long long minSession, const char* state) const;
  int RowCount() const;
  // Whether the feed table shows the Replica column.
  bool ReplicaColumnShown() const;
  // Picks `replica` in the feed's replica filter; the rows then shown (-1 if
  // the filter does not offer it or shows another replica's row), then
  // shows all replicas again.
  int RowsShownFilteredTo(const std::string& replica);

  // Types `text` into the send box, sends it as Analyze and waits (60 s at
  // most) for its status line to say "done"; the status line otherwise.
  std::string SendFromBox(const std::string& text);

  // Saves the window as a PNG; false if it cannot be written.
  bool Screenshot(const std::string& path);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace attnscope::deploy::testing
