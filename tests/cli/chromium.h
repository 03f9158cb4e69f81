// Headless Chromium (Debian's chromium package) for the viewer tests: opens a
// page, returns what its test hook wrote into <pre id="test-output">, or
// takes a screenshot.
#pragma once

#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace attnscope::testing {

// Runs `args` (args[0] looked up in PATH) with stdout to `out_path` and
// stderr to `err_path`; the exit code, or -1 if it could not start or ran
// over `timeout_seconds` (then killed).
int RunProgram(const std::vector<std::string>& args, const std::string& out_path,
               const std::string& err_path = "/dev/null", int timeout_seconds = 120);

struct PageResult {
  int exit_code = -1;
  double seconds = 0;       // wall time of the chromium process
  nlohmann::json report;    // the test hook's JSON; null when absent
  std::string dom_excerpt;  // the DOM's first 2000 bytes when there is no report
};

// Loads `url` (file://...) at 1300x900 with `virtual_time_ms` of virtual time
// and parses the test hook's output. `work_dir` holds the profile and dumps.
PageResult OpenPage(const std::string& url, const std::string& work_dir,
                    int virtual_time_ms = 5000);

// The JSON document a page holds in <script id="data" type="application/json">
// (lens --viewer, patch --viewer); null when the file or the element is
// missing.
nlohmann::json PageDocument(const std::string& html_path);

// Saves a `width` x `height` screenshot of `url` to `png`; the exit code.
int Screenshot(const std::string& url, const std::string& png, const std::string& work_dir,
               int width = 1300, int height = 900, int virtual_time_ms = 5000);

}  // namespace attnscope::testing
