// deploy/kubernetes rendered offline, the way `kubectl apply -k` would see
// it: there is no kubectl or kustomize on the build machines (and nothing
// can be downloaded), so the tests apply each overlay's patches to the base
// themselves. Only what this project's kustomizations use is implemented;
// anything else throws, naming it, so a new kustomize feature in deploy/
// fails the test instead of being silently skipped.
//
// Implemented: resources (files and directories), components
// (kind: Component), patches (inline or from a file; JSON 6902 with add,
// replace, remove, or strategic merge with containers, volumes and env
// merged by name and volumeMounts by mountPath, other lists replaced),
// labels (pairs, on metadata.labels only), images (newName, newTag) and
// configMapGenerator (files). Applied in kustomize's order: resources,
// components, generators, then patches, labels, images.
#pragma once

#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace attnscope::deploy::testing {

// The objects `kustomize build dir` would print, each as JSON (YAML scalars
// typed as Kubernetes reads them: quoted ones are strings). Throws
// std::runtime_error on a feature the renderer lacks.
std::vector<nlohmann::json> RenderKustomization(const std::string& dir);

// The object of `kind` and `name` among `objects`; null if there is none.
nlohmann::json FindObject(const std::vector<nlohmann::json>& objects, const std::string& kind,
                          const std::string& name);

// Every YAML document of `path` as JSON (see RenderKustomization).
std::vector<nlohmann::json> LoadJsonDocuments(const std::string& path);

// A Kubernetes quantity ("3Gi", "512Mi", "1.5G", "2") in bytes (or units);
// NaN if it does not parse.
double ParseQuantity(const std::string& quantity);

}  // namespace attnscope::deploy::testing
