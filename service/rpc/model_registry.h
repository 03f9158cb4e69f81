// The models a server has loaded, by name. Filled once at start-up, then
// read concurrently by every request (no locking needed after that).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "service/engine/model_bundle.h"
#include "service/rpc/model_description.h"

namespace attnscope::rpc {

class ModelRegistry {
 public:
  // Adds a loaded model; the first one added is the default model.
  // InvalidArgument for an empty name or a name already taken.
  absl::Status Add(const std::string& name, std::unique_ptr<engine::ModelBundle> bundle);

  // The model called `name`, or the default model for "". NotFound naming
  // the model and listing the loaded ones.
  absl::StatusOr<const engine::ModelBundle*> Find(std::string_view name) const;

  // `name`, or the default model's name for "".
  std::string Resolve(std::string_view name) const;

  // The loaded models, in the order they were added.
  std::vector<ModelDescription> Describe() const;

  const std::string& default_name() const { return default_name_; }
  bool empty() const { return models_.empty(); }

 private:
  std::string default_name_;
  std::vector<std::string> order_;
  std::map<std::string, std::unique_ptr<engine::ModelBundle>, std::less<>> models_;
};

}  // namespace attnscope::rpc
