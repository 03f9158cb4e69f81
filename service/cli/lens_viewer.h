// attnscope lens --viewer FILE: a self-contained HTML page of the logit lens
// (states x positions, coloured by the actual next token's probability, the
// top-1 probability or the entropy; every cell's top tokens on hover) and of
// the attention rollout (the prompt as a strip of tokens shaded by the chosen
// query's rollout weight after the chosen layer). It holds exactly the
// document `lens --json` prints.
#pragma once

#include <string>

#include "nlohmann/json.hpp"

namespace attnscope::cli {

// The page for `lens_json` (LensJson's document). FILE#test writes a summary
// of what the page drew into <pre id="test-output"> (the tests' hook).
std::string LensViewerHtml(const nlohmann::json& lens_json);

// A self-contained page: <head> with the style the lens and patch pages share
// then `style`; `body`; the tooltip and <pre id="test-output"> elements; `doc`
// in <script id="data" type="application/json">; then a strict-mode script
// that has read it into `D`, followed by `script`.
std::string ViewerPage(const std::string& title, const std::string& style,
                       const std::string& body, const nlohmann::json& doc,
                       const std::string& script);

// `doc` serialised for a <script type="application/json"> element: '<' (only
// inside its strings) written as \u003c, so that no "</script>" ends it;
// invalid UTF-8 replaced. JSON.parse reads it back unchanged.
std::string ScriptSafeJson(const nlohmann::json& doc);

}  // namespace attnscope::cli
