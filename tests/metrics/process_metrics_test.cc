// The process metrics read from /proc: the parser on fixed text, the reader
// on this very process.
#include "service/metrics/process_metrics.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "gtest/gtest.h"

namespace attnscope::metrics {
namespace {

// A /proc/<pid>/stat line whose command name holds spaces and parentheses.
// utime 250, stime 150 ticks; 7 threads; started 1000 ticks after boot;
// 4096000 bytes virtual; 300 pages resident.
constexpr const char* kStat =
    "4242 (odd ) name) S 1 4242 4242 0 -1 4194304 100 0 0 0 250 150 0 0 20 0 7 0 1000 "
    "4096000 300 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0";

TEST(ProcessMetricsTest, ParsesProcStatPastTheCommandName) {
  ProcessSample sample;
  ASSERT_TRUE(ParseProcStat(kStat, 100.0, 4096.0, 1.7e9, &sample));
  EXPECT_DOUBLE_EQ(sample.cpu_seconds.value(), 4.0);
  EXPECT_DOUBLE_EQ(sample.threads.value(), 7.0);
  EXPECT_DOUBLE_EQ(sample.start_time_seconds.value(), 1.7e9 + 10.0);
  EXPECT_DOUBLE_EQ(sample.virtual_bytes.value(), 4096000.0);
  EXPECT_DOUBLE_EQ(sample.resident_bytes.value(), 300.0 * 4096.0);
}

TEST(ProcessMetricsTest, RejectsATruncatedLine) {
  ProcessSample sample;
  EXPECT_FALSE(ParseProcStat("4242 (x) S 1 2 3", 100.0, 4096.0, 0, &sample));
  EXPECT_FALSE(ParseProcStat("no parenthesis here", 100.0, 4096.0, 0, &sample));
  EXPECT_FALSE(sample.cpu_seconds.has_value());
}

TEST(ProcessMetricsTest, ReadsThisProcess) {
  const ProcessSample before = ReadProcessSample();
  ASSERT_TRUE(before.open_fds.has_value());
  const int extra = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(extra, 0);
  const ProcessSample during = ReadProcessSample();
  close(extra);
  EXPECT_EQ(during.open_fds.value(), before.open_fds.value() + 1);
  ASSERT_TRUE(during.resident_bytes.has_value());
  EXPECT_GT(during.resident_bytes.value(), 1 << 20);
  ASSERT_TRUE(during.start_time_seconds.has_value());
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  // Started within the last hour, not in the future (clock-tick rounding).
  EXPECT_LE(during.start_time_seconds.value(), now + 1.0);
  EXPECT_GT(during.start_time_seconds.value(), now - 3600.0);
  ASSERT_TRUE(during.cpu_seconds.has_value());
  EXPECT_GE(during.cpu_seconds.value(), 0.0);
  EXPECT_GE(during.threads.value(), 1.0);
}

TEST(ProcessMetricsTest, FamiliesHaveTheConventionalNamesAndTypes) {
  ProcessSample sample;
  sample.cpu_seconds = 1.5;
  sample.open_fds = 9;
  const std::vector<prometheus::MetricFamily> families = ProcessFamilies(sample);
  ASSERT_EQ(families.size(), 2u);
  EXPECT_EQ(families[0].name, "process_cpu_seconds_total");
  EXPECT_EQ(families[0].type, prometheus::MetricType::Counter);
  EXPECT_DOUBLE_EQ(families[0].metric.at(0).counter.value, 1.5);
  EXPECT_EQ(families[1].name, "process_open_fds");
  EXPECT_EQ(families[1].type, prometheus::MetricType::Gauge);
  EXPECT_DOUBLE_EQ(families[1].metric.at(0).gauge.value, 9.0);
}

}  // namespace
}  // namespace attnscope::metrics
