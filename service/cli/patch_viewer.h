// attnscope patch --viewer FILE: a self-contained HTML page of an activation
// patching run: the recovery grid (layers x heads, or layers x positions with
// --residual) on a diverging scale, each cell's metric and tokens on hover.
// It holds exactly the document `patch --json` prints, with the two prompts'
// tokens beside it.
#pragma once

#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace attnscope::cli {

// The page for `patch_json` (PatchJson's document). FILE#test writes a
// summary of what the page drew into <pre id="test-output"> (the tests' hook).
std::string PatchViewerHtml(const nlohmann::json& patch_json,
                            const std::vector<std::string>& clean_tokens,
                            const std::vector<std::string>& corrupted_tokens);

}  // namespace attnscope::cli
