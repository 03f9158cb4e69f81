#include "tests/cli/chromium.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>

extern char** environ;

namespace attnscope::testing {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> ChromiumArgs(const std::string& work_dir, int virtual_time_ms) {
  return {"chromium", "--headless", "--no-sandbox", "--disable-gpu",
          "--disable-background-networking", "--disable-component-update", "--disable-sync",
          "--no-first-run", "--hide-scrollbars", "--user-data-dir=" + work_dir + "/profile",
          "--virtual-time-budget=" + std::to_string(virtual_time_ms)};
}

}  // namespace

int RunProgram(const std::vector<std::string>& args, const std::string& out_path,
               const std::string& err_path, int timeout_seconds) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) return -1;
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_seconds);
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // polling a child, not syncing
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

PageResult OpenPage(const std::string& url, const std::string& work_dir, int virtual_time_ms) {
  std::vector<std::string> args = ChromiumArgs(work_dir, virtual_time_ms);
  args.push_back("--window-size=1300,900");
  args.push_back("--dump-dom");
  args.push_back(url);
  const std::string out = work_dir + "/dom.html";
  PageResult r;
  const auto start = std::chrono::steady_clock::now();
  r.exit_code = RunProgram(args, out, work_dir + "/chromium.log");
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string dom = Slurp(out);
  const std::string open = "<pre id=\"test-output\">";
  const size_t begin = dom.find(open), end = dom.find("</pre>", begin);
  if (begin == std::string::npos || end == std::string::npos || end == begin + open.size()) {
    r.dom_excerpt = dom.substr(0, 2000);
    return r;
  }
  std::string text = dom.substr(begin + open.size(), end - begin - open.size());
  for (const auto& [entity, c] : std::vector<std::pair<std::string, std::string>>{
           {"&quot;", "\""}, {"&lt;", "<"}, {"&gt;", ">"}, {"&amp;", "&"}}) {
    for (size_t at; (at = text.find(entity)) != std::string::npos;) text.replace(at, entity.size(), c);
  }
  r.report = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  return r;
}

int Screenshot(const std::string& url, const std::string& png, const std::string& work_dir,
               int width, int height, int virtual_time_ms) {
  std::vector<std::string> args = ChromiumArgs(work_dir, virtual_time_ms);
  args.push_back("--window-size=" + std::to_string(width) + "," + std::to_string(height));
  args.push_back("--screenshot=" + png);
  args.push_back(url);
  return RunProgram(args, work_dir + "/screenshot.log", work_dir + "/screenshot.err");
}

nlohmann::json PageDocument(const std::string& html_path) {
  std::ifstream in(html_path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  const std::string html = bytes.str();
  const std::string open = "<script id=\"data\" type=\"application/json\">";
  const size_t begin = html.find(open);
  if (begin == std::string::npos) return nullptr;
  const size_t end = html.find("</script>", begin);
  if (end == std::string::npos) return nullptr;
  return nlohmann::json::parse(html.substr(begin + open.size(), end - begin - open.size()),
                               nullptr, false);
}

}  // namespace attnscope::testing
