#include "service/metrics/process_metrics.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace attnscope::metrics {
namespace {

std::string Slurp(const char* path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The "btime" line of /proc/stat: boot time in seconds since the epoch.
std::optional<double> BootTimeSeconds() {
  std::istringstream lines(Slurp("/proc/stat"));
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("btime ", 0) == 0) return std::strtod(line.c_str() + 6, nullptr);
  }
  return std::nullopt;
}

// Entries of /proc/self/fd, less the one opendir itself holds.
std::optional<double> OpenFds() {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return std::nullopt;
  double count = 0;
  while (const dirent* entry = readdir(dir)) {
    if (entry->d_name[0] != '.') ++count;
  }
  closedir(dir);
  return count - 1;
}

prometheus::MetricFamily Family(const ProcessFamilyInfo& info, double value) {
  prometheus::MetricFamily family;
  family.name = info.name;
  family.help = info.help;
  prometheus::ClientMetric metric;
  if (std::string(info.type) == "counter") {
    family.type = prometheus::MetricType::Counter;
    metric.counter.value = value;
  } else {
    family.type = prometheus::MetricType::Gauge;
    metric.gauge.value = value;
  }
  family.metric.push_back(metric);
  return family;
}

}  // namespace

bool ParseProcStat(const std::string& stat, double ticks_per_second, double page_bytes,
                   double boot_time_seconds, ProcessSample* sample) {
  // "pid (comm) state ppid ...": comm may hold anything, so fields are counted
  // from the last ')'. After it, field 3 (state) is the first.
  const std::size_t close = stat.rfind(')');
  if (close == std::string::npos || ticks_per_second <= 0) return false;
  std::istringstream rest(stat.substr(close + 1));
  std::vector<std::string> fields;
  for (std::string field; rest >> field;) fields.push_back(field);
  // Fields (man 5 proc, 1-based): 14 utime, 15 stime, 20 num_threads,
  // 22 starttime, 23 vsize, 24 rss. fields[0] is field 3.
  constexpr std::size_t kFirst = 3;
  if (fields.size() < 24 - kFirst + 1) return false;
  const auto at = [&](std::size_t number) {
    return std::strtod(fields[number - kFirst].c_str(), nullptr);
  };
  sample->cpu_seconds = (at(14) + at(15)) / ticks_per_second;
  sample->threads = at(20);
  sample->start_time_seconds = boot_time_seconds + at(22) / ticks_per_second;
  sample->virtual_bytes = at(23);
  sample->resident_bytes = at(24) * page_bytes;
  return true;
}

ProcessSample ReadProcessSample() {
  ProcessSample sample;
  const std::optional<double> boot = BootTimeSeconds();
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  if (boot.has_value()) ParseProcStat(Slurp("/proc/self/stat"), ticks, page, *boot, &sample);
  sample.open_fds = OpenFds();
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    sample.max_fds = static_cast<double>(limit.rlim_cur);
  }
  return sample;
}

const std::vector<ProcessFamilyInfo>& ProcessFamilyInfos() {
  static const auto* const kInfos = new std::vector<ProcessFamilyInfo>{
      {"process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds."},
      {"process_resident_memory_bytes", "gauge", "Resident memory size in bytes."},
      {"process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes."},
      {"process_start_time_seconds", "gauge",
       "Start time of the process since unix epoch in seconds."},
      {"process_open_fds", "gauge", "Number of open file descriptors."},
      {"process_max_fds", "gauge", "Maximum number of open file descriptors."},
      {"process_threads", "gauge", "Number of OS threads in the process."},
  };
  return *kInfos;
}

std::vector<prometheus::MetricFamily> ProcessFamilies(const ProcessSample& sample) {
  const std::optional<double> values[] = {
      sample.cpu_seconds, sample.resident_bytes, sample.virtual_bytes, sample.start_time_seconds,
      sample.open_fds,    sample.max_fds,        sample.threads};
  std::vector<prometheus::MetricFamily> families;
  const std::vector<ProcessFamilyInfo>& infos = ProcessFamilyInfos();
  for (std::size_t i = 0; i < infos.size(); ++i) {
    if (values[i].has_value()) families.push_back(Family(infos[i], *values[i]));
  }
  return families;
}

}  // namespace attnscope::metrics
