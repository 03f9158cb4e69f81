// MetricsServer: /metrics over plain HTTP/1.1 from one thread of our own.
//
// Why not prometheus::Exposer: it runs civetweb, and Debian's libcivetweb is
// compiled with USE_STACK_SIZE=102400, so every civetweb thread is created
// with an explicit 100 KiB stack. glibc carves each thread's static TLS out
// of its stack and refuses (EINVAL) a stack smaller than that TLS plus 16 KiB.
// A process that links Debian's libtorch carries about 106 KiB of static TLS
// (libopenblas0-openmp alone 60 KiB, libglog 30 KiB, libtorch_cpu 10 KiB), so
// civetweb cannot start a single thread and the Exposer throws "null context
// when constructing CivetServer". Nothing at run time changes that size:
// civetweb has no stack-size option, pthread_setattr_default_np only affects
// threads created without an explicit size, and the glibc tunables can only
// enlarge static TLS (glibc.rtld.optional_static_tls), never shrink it. So
// the exposition is served here with prometheus-cpp's TextSerializer from a
// std::thread, whose stack is the process default (RLIMIT_STACK, 8 MiB) like
// every other thread of the server. See notes/metrics-openblas.md.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"
#include "service/core/status_macros.h"
#include "service/metrics/scrape_http.h"
#include "service/metrics/service_metrics.h"

namespace attnscope::metrics {
namespace {

using Clock = std::chrono::steady_clock;

// A scraper gets this long to send its request and read the answer; the
// server answers one connection at a time, so a stalled client delays the
// next scrape by at most this much.
constexpr std::chrono::seconds kConnectionDeadline{5};
constexpr int kListenBacklog = 64;

// Closes a file descriptor on scope exit.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    std::swap(fd_, other.fd_);
    return *this;
  }
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

std::string ErrnoText(const char* call) { return absl::StrCat(call, ": ", std::strerror(errno)); }

absl::StatusOr<Fd> BindAndListen(const std::string& listen, const ListenAddress& address) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  // Numeric hosts only, so starting never waits on DNS; no node is the
  // wildcard address.
  const std::string host = address.host == "localhost" ? "127.0.0.1" : address.host;
  const char* node = host.empty() ? nullptr : host.c_str();
  hints.ai_flags = AI_PASSIVE | AI_NUMERICHOST | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(address.port);
  const int rc = getaddrinfo(node, port.c_str(), &hints, &found);
  if (rc != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics listen address '", listen, "': host '", address.host,
                     "' is not an IP address or localhost (", gai_strerror(rc), ")"));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> results(found, &freeaddrinfo);
  std::string reason = "no address to bind";
  for (const addrinfo* ai = results.get(); ai != nullptr; ai = ai->ai_next) {
    Fd fd(socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol));
    if (fd.get() < 0) {
      reason = ErrnoText("socket");
      continue;
    }
    const int one = 1;
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      reason = ErrnoText("bind");
      continue;
    }
    if (::listen(fd.get(), kListenBacklog) != 0) {
      reason = ErrnoText("listen");
      continue;
    }
    return fd;
  }
  return absl::UnavailableError(absl::StrCat("cannot serve metrics on '", listen, "': ", reason));
}

absl::StatusOr<int> BoundPort(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    return absl::InternalError(ErrnoText("getsockname"));
  }
  if (address.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&address)->sin6_port);
  }
  return ntohs(reinterpret_cast<const sockaddr_in*>(&address)->sin_port);
}

}  // namespace

struct MetricsServer::Impl {
  Fd listen_fd;
  Fd wake_read;  // Readable once the server is stopping.
  Fd wake_write;
  int port = 0;
  std::function<std::vector<prometheus::MetricFamily>()> collect;
  std::thread thread;

  ~Impl() {
    if (thread.joinable()) {
      const char stop = 's';
      // A full pipe already wakes the thread, so a failed write is harmless.
      [[maybe_unused]] ssize_t written = write(wake_write.get(), &stop, 1);
      thread.join();
    }
  }

  enum class Wait { kReady, kTimeout, kStop };

  // Waits until `fd` has `events`, the deadline passes or the server stops.
  Wait WaitFor(int fd, short events, Clock::time_point deadline) const {
    for (;;) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) return Wait::kTimeout;
      pollfd fds[2] = {{fd, events, 0}, {wake_read.get(), POLLIN, 0}};
      const int ready = poll(fds, 2, static_cast<int>(left.count()));
      if (ready < 0 && errno == EINTR) continue;
      if (ready < 0 || fds[1].revents != 0) return Wait::kStop;
      if (fds[0].revents != 0) return Wait::kReady;
    }
  }

  void Run() {
    const auto forever = Clock::time_point::max();
    while (WaitFor(listen_fd.get(), POLLIN, forever) == Wait::kReady) {
      Fd connection(accept4(listen_fd.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
      if (connection.get() < 0) {
        // Out of descriptors or memory: back off instead of spinning on a
        // listen socket that stays readable.
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          if (WaitFor(wake_read.get(), POLLIN, Clock::now() + std::chrono::milliseconds(100)) ==
              Wait::kStop) {
            return;
          }
        }
        continue;
      }
      try {
        Serve(connection.get());
      } catch (const std::exception&) {
        // Out of memory while serializing: drop this scrape, keep serving.
      }
    }
  }

  void Serve(int connection) const {
    const Clock::time_point deadline = Clock::now() + kConnectionDeadline;
    std::string head;
    char buffer[2048];
    while (!HasCompleteHead(head)) {
      if (head.size() >= kMaxRequestHeadBytes) {
        SendAll(connection, HeadTooLargeResponse(), deadline);
        return;
      }
      if (WaitFor(connection, POLLIN, deadline) != Wait::kReady) return;
      const ssize_t got =
          recv(connection, buffer, std::min(sizeof(buffer), kMaxRequestHeadBytes - head.size()), 0);
      if (got == 0) return;
      if (got < 0) {
        if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
        return;
      }
      head.append(buffer, static_cast<std::size_t>(got));
    }
    SendAll(connection, BuildScrapeResponse(head, [this] { return Exposition(); }), deadline);
  }

  void SendAll(int connection, std::string_view data, Clock::time_point deadline) const {
    while (!data.empty()) {
      if (WaitFor(connection, POLLOUT, deadline) != Wait::kReady) return;
      const ssize_t sent = send(connection, data.data(), data.size(), MSG_NOSIGNAL);
      if (sent < 0) {
        if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
        return;
      }
      data.remove_prefix(static_cast<std::size_t>(sent));
    }
  }

  std::string Exposition() const { return prometheus::TextSerializer().Serialize(collect()); }
};

MetricsServer::MetricsServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

MetricsServer::~MetricsServer() = default;

int MetricsServer::port() const { return impl_->port; }

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(const std::string& listen,
                                                                    const ServiceMetrics& metrics) {
  ATTNSCOPE_ASSIGN_OR_RETURN(const ListenAddress address, ParseListenAddress(listen));
  auto impl = std::make_unique<Impl>();
  ATTNSCOPE_ASSIGN_OR_RETURN(impl->listen_fd, BindAndListen(listen, address));
  ATTNSCOPE_ASSIGN_OR_RETURN(impl->port, BoundPort(impl->listen_fd.get()));
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return absl::InternalError(ErrnoText("pipe2"));
  impl->wake_read = Fd(pipe_fds[0]);
  impl->wake_write = Fd(pipe_fds[1]);
  impl->collect = metrics.Collector();
  try {
    // A default-sized stack (see the top of this file for why not civetweb's).
    impl->thread = std::thread([raw = impl.get()] { raw->Run(); });
    pthread_setname_np(impl->thread.native_handle(), "metrics-http");
  } catch (const std::system_error& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot start the metrics thread for '", listen, "': ", e.what()));
  }
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(impl)));
}

}  // namespace attnscope::metrics
