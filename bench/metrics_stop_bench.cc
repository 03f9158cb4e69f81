// How long stopping the /metrics server takes while a client that connected
// and never sent anything holds it inside Serve(). The server's stop pipe
// should end the wait at once; without it the stop would last until the
// connection deadline (5 s, metrics_server.cc). Prints each run and the
// median, in milliseconds.
//
// Usage: metrics_stop_bench [--runs 5]
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "service/metrics/service_metrics.h"

namespace {

using attnscope::metrics::MetricsServer;
using attnscope::metrics::ServiceMetrics;

// Milliseconds to destroy a server that has accepted a silent client; -1 if
// it could not be set up.
double StopWithStalledClient() {
  ServiceMetrics metrics;
  auto server = MetricsServer::Start("127.0.0.1:0", metrics);
  if (!server.ok()) {
    std::fprintf(stderr, "metrics_stop_bench: %s\n", server.status().ToString().c_str());
    return -1;
  }
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>((*server)->port()));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    std::perror("metrics_stop_bench: connect");
    if (fd >= 0) close(fd);
    return -1;
  }
  // Time for the server thread to accept it and wait for the request.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto start = std::chrono::steady_clock::now();
  server->reset();
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  close(fd);
  return ms;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--runs") runs = std::max(1, std::atoi(argv[i + 1]));
  }
  std::vector<double> times;
  for (int r = 0; r < runs; ++r) {
    const double ms = StopWithStalledClient();
    if (ms < 0) return 1;
    times.push_back(ms);
    std::printf("run %d: stopped in %.2f ms\n", r + 1, ms);
  }
  std::sort(times.begin(), times.end());
  std::printf("median %.2f ms over %d runs (the connection deadline is 5000 ms)\n",
              times[times.size() / 2], runs);
  return 0;
}
