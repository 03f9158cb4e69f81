// The metrics endpoint inside a process that links libtorch and has run a
// BLAS product, as attnscope-server does. Debian's libtorch brings ~106 KiB
// of static TLS (libopenblas0-openmp 60 KiB, libglog 30 KiB, libtorch_cpu
// 10 KiB); glibc places it inside every thread's stack, so civetweb's fixed
// 100 KiB stacks (prometheus::Exposer) cannot be created here at all.
#include <pthread.h>

#include <memory>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/exposer.h"
#include "service/metrics/service_metrics.h"
#include "tests/metrics/blas_matmul.h"
#include "tests/metrics/metrics_test_support.h"

namespace attnscope::metrics {
namespace {

// Debian's libcivetweb is built with USE_STACK_SIZE=102400.
constexpr size_t kCivetwebStackBytes = 102400;

void* DoNothing(void*) { return nullptr; }

TEST(TorchProcessTest, ThreadsWithCivetwebStacksCannotStartHere) {
  ASSERT_DOUBLE_EQ(testing::SumOfBlasProduct(64), 2.0 * 64 * 64 * 64);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, kCivetwebStackBytes);
  pthread_t thread;
  const int rc = pthread_create(&thread, &attr, DoNothing, nullptr);
  pthread_attr_destroy(&attr);
  if (rc == 0) pthread_join(thread, nullptr);
  // If this ever passes, the static TLS shrank and the process below no
  // longer reproduces the problem the metrics server works around.
  EXPECT_EQ(rc, EINVAL);
}

TEST(TorchProcessTest, PrometheusExposerFailsHere) {
  ASSERT_DOUBLE_EQ(testing::SumOfBlasProduct(64), 2.0 * 64 * 64 * 64);
  EXPECT_THROW(prometheus::Exposer("127.0.0.1:0"), std::exception);
}

TEST(TorchProcessTest, MetricsServerServesAfterABlasProduct) {
  ASSERT_DOUBLE_EQ(testing::SumOfBlasProduct(64), 2.0 * 64 * 64 * 64);
  ServiceMetrics metrics;
  metrics.RecordRequest("Analyze", "m", ServiceMetrics::Origin::kUser, "OK", 0.05);
  metrics.RecordRequest("Analyze", "m", ServiceMetrics::Origin::kUser, "OK", 0.07);
  absl::StatusOr<std::unique_ptr<MetricsServer>> server =
      MetricsServer::Start("127.0.0.1:0", metrics);
  ASSERT_TRUE(server.ok()) << server.status();
  const testing::HttpReply reply = testing::HttpGet((*server)->port(), "/metrics");
  ASSERT_EQ(reply.status, 200) << reply.head;
  EXPECT_TRUE(testing::HasLine(
      reply.body, R"(attnscope_requests_total{code="OK",model="m",origin="user",rpc="Analyze"} 2)"))
      << reply.body;
  // The process still computes after the server thread started.
  EXPECT_DOUBLE_EQ(testing::SumOfBlasProduct(32), 2.0 * 32 * 32 * 32);
}

}  // namespace
}  // namespace attnscope::metrics
