// The metrics endpoint inside a process that links libtorch and has run a
// BLAS product, as attnscope-server does. Debian's libtorch brings ~106 KiB
// of static TLS (libopenblas0-openmp 60 KiB, libglog 30 KiB, libtorch_cpu
// 10 KiB); glibc places it inside every thread's stack, so civetweb's fixed
// 100 KiB stacks (prometheus::Exposer) cannot be created here at all.
// The tests named DebianStaticTls* document that packaging defect: they skip
// (saying why) on a system where it is absent, where MetricsServer's own
// thread would work either way.
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

// pthread_create's result for a thread with civetweb's stack size, after a
// BLAS product loaded libtorch's dependencies (0 where the defect is absent).
int CreateCivetwebSizedThread() {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, kCivetwebStackBytes);
  pthread_t thread;
  const int rc = pthread_create(&thread, &attr, DoNothing, nullptr);
  pthread_attr_destroy(&attr);
  if (rc == 0) pthread_join(thread, nullptr);
  return rc;
}

constexpr char kDefectAbsent[] =
    "Debian's static-TLS defect is absent here: a 100 KiB-stack thread starts in a "
    "libtorch process (static TLS shrank or another BLAS is installed), so there is "
    "nothing to reproduce";

TEST(TorchProcessTest, DebianStaticTlsDefectBlocksCivetwebSizedStacks) {
  ASSERT_DOUBLE_EQ(testing::SumOfBlasProduct(64), 2.0 * 64 * 64 * 64);
  const int rc = CreateCivetwebSizedThread();
  if (rc == 0) GTEST_SKIP() << kDefectAbsent;
  EXPECT_EQ(rc, EINVAL) << "the defect shows as EINVAL (stack smaller than static TLS)";
}

TEST(TorchProcessTest, DebianStaticTlsDefectMakesPrometheusExposerFail) {
  ASSERT_DOUBLE_EQ(testing::SumOfBlasProduct(64), 2.0 * 64 * 64 * 64);
  if (CreateCivetwebSizedThread() == 0) GTEST_SKIP() << kDefectAbsent;
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
