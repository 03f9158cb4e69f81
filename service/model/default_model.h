// Where the bundled model is, for every binary (torch-free).
#pragma once

#include <string>

namespace attnscope::model {

// The bundled default model: $ATTNSCOPE_MODEL_DIR if set, else the
// models/tiny-gpt2 directory of the source tree this binary was built from.
std::string DefaultModelDirectory();

}  // namespace attnscope::model
