#include "service/model/default_model.h"

#include <cstdlib>

namespace attnscope::model {

std::string DefaultModelDirectory() {
  if (const char* env = std::getenv("ATTNSCOPE_MODEL_DIR"); env != nullptr && *env != '\0') {
    return env;
  }
  return ATTNSCOPE_DEFAULT_MODEL_DIR;
}

}  // namespace attnscope::model
