// The process metrics every Prometheus client library exports by convention
// (prometheus-cpp has no process collector): read from /proc/self when
// collected, so a scrape always sees the current values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "prometheus/metric_family.h"

namespace attnscope::metrics {

// One reading of /proc/self. A field is nullopt when its source could not be
// read (no /proc, a format this parser does not know).
struct ProcessSample {
  std::optional<double> cpu_seconds;         // user + system time
  std::optional<double> resident_bytes;      // RSS
  std::optional<double> virtual_bytes;       // VSZ
  std::optional<double> start_time_seconds;  // since the Unix epoch
  std::optional<double> open_fds;
  std::optional<double> max_fds;  // RLIMIT_NOFILE soft limit
  std::optional<double> threads;
};

// Reads /proc/self/stat, /proc/self/fd, /proc/stat (boot time) and
// getrlimit. Never fails: what cannot be read stays nullopt.
ProcessSample ReadProcessSample();

// Parses the text of /proc/<pid>/stat (the command name may hold spaces and
// parentheses) given the clock ticks per second, the page size and the boot
// time in seconds since the epoch. Fills cpu_seconds, resident_bytes,
// virtual_bytes, threads and start_time_seconds; leaves sample untouched and
// returns false on a malformed line.
bool ParseProcStat(const std::string& stat, double ticks_per_second, double page_bytes,
                   double boot_time_seconds, ProcessSample* sample);

// The names, types and help texts of the families ProcessFamilies() returns.
struct ProcessFamilyInfo {
  const char* name;
  const char* type;
  const char* help;
};
const std::vector<ProcessFamilyInfo>& ProcessFamilyInfos();

// The sample as Prometheus families (process_cpu_seconds_total,
// process_resident_memory_bytes, ...), leaving out the fields it lacks.
std::vector<prometheus::MetricFamily> ProcessFamilies(const ProcessSample& sample);

}  // namespace attnscope::metrics
