#include "service/rpc/model_registry.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace attnscope::rpc {

absl::Status ModelRegistry::Add(const std::string& name,
                                std::unique_ptr<engine::ModelBundle> bundle) {
  if (name.empty()) return absl::InvalidArgumentError("model name: must not be empty");
  if (models_.count(name) > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("model name '", name, "' is given twice; give each model its own name"));
  }
  if (default_name_.empty()) default_name_ = name;
  order_.push_back(name);
  models_[name] = std::move(bundle);
  return absl::OkStatus();
}

absl::StatusOr<const engine::ModelBundle*> ModelRegistry::Find(std::string_view name) const {
  const std::string resolved = Resolve(name);
  auto it = models_.find(resolved);
  if (it == models_.end()) {
    return absl::NotFoundError(absl::StrCat("model: '", resolved,
                                            "' is not loaded on this server; loaded models: ",
                                            absl::StrJoin(order_, ", "), " (see ListModels)"));
  }
  return it->second.get();
}

std::string ModelRegistry::Resolve(std::string_view name) const {
  return name.empty() ? default_name_ : std::string(name);
}

std::vector<ModelDescription> ModelRegistry::Describe() const {
  std::vector<ModelDescription> out;
  for (const std::string& name : order_) {
    const engine::ModelBundle& bundle = *models_.at(name);
    out.push_back(DescribeModel(name, bundle.config(), bundle.tokenizer != nullptr));
  }
  return out;
}

}  // namespace attnscope::rpc
