#include "tests/deploy/kustomize_render.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include "yaml-cpp/yaml.h"

namespace attnscope::deploy::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

[[noreturn]] void Unsupported(const fs::path& where, const std::string& what) {
  throw std::runtime_error(where.string() + ": " + what +
                           " is not implemented by tests/deploy/kustomize_render.cc");
}

// A plain (unquoted) YAML scalar typed as YAML 1.2's core schema does, which
// is what Kubernetes' YAML reader does for these files.
json PlainScalar(const std::string& text) {
  if (text.empty() || text == "~" || text == "null" || text == "Null" || text == "NULL") {
    return nullptr;
  }
  if (text == "true" || text == "True" || text == "TRUE") return true;
  if (text == "false" || text == "False" || text == "FALSE") return false;
  const char* begin = text.c_str();
  char* end = nullptr;
  const long long integer = std::strtoll(begin, &end, 10);
  if (*end == '\0' && text.find_first_not_of("+-0123456789") == std::string::npos) {
    return integer;
  }
  const double number = std::strtod(begin, &end);
  if (*end == '\0' && text.find_first_not_of("+-0123456789.eE") == std::string::npos) {
    return number;
  }
  return text;
}

json ToJson(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Scalar:
      // yaml-cpp tags a quoted or block scalar "!", a plain one "?".
      return node.Tag() == "!" ? json(node.Scalar()) : PlainScalar(node.Scalar());
    case YAML::NodeType::Sequence: {
      json out = json::array();
      for (const YAML::Node& item : node) out.push_back(ToJson(item));
      return out;
    }
    case YAML::NodeType::Map: {
      json out = json::object();
      for (const auto& entry : node) out[entry.first.as<std::string>()] = ToJson(entry.second);
      return out;
    }
  }
  return nullptr;
}

std::string Slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path.string() + ": cannot read");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string Kind(const json& object) { return object.value("kind", ""); }

std::string Name(const json& object) {
  return object.contains("metadata") ? object["metadata"].value("name", "") : "";
}

// The key that identifies an item of list `field` in a strategic merge
// patch (Kubernetes' patchMergeKey of the fields this project patches);
// "" for lists a patch replaces.
std::string MergeKey(const std::string& field) {
  static const std::map<std::string, std::string> keys = {
      {"containers", "name"},     {"initContainers", "name"},   {"volumes", "name"},
      {"env", "name"},            {"imagePullSecrets", "name"}, {"volumeMounts", "mountPath"},
      {"ports", "containerPort"},
  };
  const auto it = keys.find(field);
  return it == keys.end() ? "" : it->second;
}

void StrategicMerge(json& target, const json& patch, const fs::path& where) {
  for (const auto& [key, value] : patch.items()) {
    if (key.rfind("$", 0) == 0) Unsupported(where, "the strategic-merge directive " + key);
    if (value.is_null()) {
      target.erase(key);
    } else if (value.is_object() && target.contains(key) && target[key].is_object()) {
      StrategicMerge(target[key], value, where);
    } else if (value.is_array() && target.contains(key) && target[key].is_array() &&
               !MergeKey(key).empty()) {
      const std::string merge_key = MergeKey(key);
      for (const json& item : value) {
        if (!item.is_object() || !item.contains(merge_key)) {
          Unsupported(where, "a " + key + " item without " + merge_key);
        }
        bool merged = false;
        for (json& existing : target[key]) {
          if (existing.is_object() && existing.value(merge_key, json()) == item[merge_key]) {
            StrategicMerge(existing, item, where);
            merged = true;
          }
        }
        if (!merged) target[key].push_back(item);
      }
    } else {
      target[key] = value;
    }
  }
}

void ApplyPatch(std::vector<json>& objects, const YAML::Node& entry, const fs::path& dir) {
  for (const auto& field : entry) {
    const std::string key = field.first.as<std::string>();
    if (key != "target" && key != "patch" && key != "path") Unsupported(dir, "patches." + key);
  }
  const std::string text = entry["patch"] ? entry["patch"].as<std::string>()
                                          : Slurp(dir / entry["path"].as<std::string>());
  const json body = ToJson(YAML::Load(text));
  std::string kind, name;
  if (entry["target"]) {
    for (const auto& field : entry["target"]) {
      const std::string key = field.first.as<std::string>();
      if (key != "kind" && key != "name") Unsupported(dir, "patches.target." + key);
    }
    kind = entry["target"]["kind"].as<std::string>();
    name = entry["target"]["name"].as<std::string>();
  } else if (body.is_object()) {
    kind = Kind(body);
    name = Name(body);
  } else {
    Unsupported(dir, "a JSON 6902 patch without a target");
  }
  int matched = 0;
  for (json& object : objects) {
    if (Kind(object) != kind || Name(object) != name) continue;
    ++matched;
    if (body.is_array()) {
      for (const json& op : body) {
        const std::string verb = op.value("op", "");
        if (verb != "add" && verb != "replace" && verb != "remove") {
          Unsupported(dir, "the JSON 6902 operation " + verb);
        }
      }
      object = object.patch(body);  // throws on a path that does not exist
    } else if (body.is_object()) {
      StrategicMerge(object, body, dir);
    } else {
      Unsupported(dir, "a patch that is neither a list of operations nor an object");
    }
  }
  // kustomize fails on a patch whose target is missing; so does this.
  if (matched == 0) {
    throw std::runtime_error(dir.string() + ": no " + kind + "/" + name + " to patch");
  }
}

void ApplyLabels(std::vector<json>& objects, const YAML::Node& labels, const fs::path& dir) {
  for (const YAML::Node& entry : labels) {
    for (const auto& field : entry) {
      const std::string key = field.first.as<std::string>();
      // includeSelectors/includeTemplates: false is what plain pairs do.
      if (key == "includeSelectors" || key == "includeTemplates") {
        if (field.second.as<bool>()) Unsupported(dir, "labels." + key + ": true");
      } else if (key != "pairs") {
        Unsupported(dir, "labels." + key);
      }
    }
    for (json& object : objects) {
      for (const auto& pair : entry["pairs"]) {
        object["metadata"]["labels"][pair.first.as<std::string>()] = pair.second.as<std::string>();
      }
    }
  }
}

// "host:5000/a/b:tag@sha256:..." -> name "host:5000/a/b", tag "tag".
void SplitImage(const std::string& image, std::string* name, std::string* tag) {
  const std::string no_digest = image.substr(0, image.find('@'));
  const std::size_t slash = no_digest.rfind('/');
  const std::size_t colon = no_digest.rfind(':');
  if (colon != std::string::npos && (slash == std::string::npos || colon > slash)) {
    *name = no_digest.substr(0, colon);
    *tag = no_digest.substr(colon + 1);
  } else {
    *name = no_digest;
    tag->clear();
  }
}

void RewriteImages(json& node, const std::string& from, const std::string& new_name,
                   const std::string& new_tag) {
  if (node.is_object()) {
    for (const char* list : {"containers", "initContainers"}) {
      if (!node.contains(list) || !node[list].is_array()) continue;
      for (json& container : node[list]) {
        if (!container.contains("image")) continue;
        std::string name, tag;
        SplitImage(container["image"].get<std::string>(), &name, &tag);
        if (name != from) continue;
        if (!new_name.empty()) name = new_name;
        if (!new_tag.empty()) tag = new_tag;
        container["image"] = tag.empty() ? name : name + ":" + tag;
      }
    }
    for (auto& [key, value] : node.items()) RewriteImages(value, from, new_name, new_tag);
  } else if (node.is_array()) {
    for (json& item : node) RewriteImages(item, from, new_name, new_tag);
  }
}

void ApplyImages(std::vector<json>& objects, const YAML::Node& images, const fs::path& dir) {
  for (const YAML::Node& entry : images) {
    for (const auto& field : entry) {
      const std::string key = field.first.as<std::string>();
      if (key != "name" && key != "newName" && key != "newTag") Unsupported(dir, "images." + key);
    }
    const std::string new_name = entry["newName"] ? entry["newName"].as<std::string>() : "";
    const std::string new_tag = entry["newTag"] ? entry["newTag"].as<std::string>() : "";
    for (json& object : objects) {
      RewriteImages(object, entry["name"].as<std::string>(), new_name, new_tag);
    }
  }
}

void GenerateConfigMaps(std::vector<json>& objects, const YAML::Node& generators,
                        const fs::path& dir) {
  for (const YAML::Node& generator : generators) {
    for (const auto& field : generator) {
      const std::string key = field.first.as<std::string>();
      if (key != "name" && key != "files" && key != "options") {
        Unsupported(dir, "configMapGenerator." + key);
      }
    }
    json map = {{"apiVersion", "v1"},
                {"kind", "ConfigMap"},
                {"metadata", {{"name", generator["name"].as<std::string>()}}},
                {"data", json::object()}};
    const YAML::Node options = generator["options"];
    if (!options || !options["disableNameSuffixHash"] ||
        !options["disableNameSuffixHash"].as<bool>()) {
      Unsupported(dir, "a generated name with a hash suffix");
    }
    if (options["labels"]) map["metadata"]["labels"] = ToJson(options["labels"]);
    for (const YAML::Node& file : generator["files"]) {
      const std::string spec = file.as<std::string>();
      const std::size_t eq = spec.find('=');
      const std::string key = eq == std::string::npos ? fs::path(spec).filename().string()
                                                      : spec.substr(0, eq);
      map["data"][key] = Slurp(dir / spec.substr(eq == std::string::npos ? 0 : eq + 1));
    }
    objects.push_back(map);
  }
}

// Adds what the kustomization (or component) in `dir` contributes to
// `objects` and applies its transformers to all of them.
void Accumulate(const fs::path& dir, const std::string& expected_kind, std::vector<json>& objects) {
  const YAML::Node k = YAML::LoadFile((dir / "kustomization.yaml").string());
  static const std::set<std::string> known = {
      "apiVersion", "kind",   "resources", "components",        "patches",
      "labels",     "images", "configMapGenerator"};
  for (const auto& field : k) {
    const std::string key = field.first.as<std::string>();
    if (!known.count(key)) Unsupported(dir, key);
  }
  if (k["kind"].as<std::string>() != expected_kind) {
    throw std::runtime_error(dir.string() + ": a " + k["kind"].as<std::string>() + ", expected a " +
                             expected_kind);
  }
  for (const YAML::Node& resource : k["resources"]) {
    const fs::path path = dir / resource.as<std::string>();
    if (fs::is_directory(path)) {
      std::vector<json> sub;
      Accumulate(path, "Kustomization", sub);
      objects.insert(objects.end(), sub.begin(), sub.end());
    } else {
      const std::vector<json> docs = LoadJsonDocuments(path.string());
      objects.insert(objects.end(), docs.begin(), docs.end());
    }
  }
  for (const YAML::Node& component : k["components"]) {
    Accumulate(dir / component.as<std::string>(), "Component", objects);
  }
  GenerateConfigMaps(objects, k["configMapGenerator"], dir);
  for (const YAML::Node& patch : k["patches"]) ApplyPatch(objects, patch, dir);
  ApplyLabels(objects, k["labels"], dir);
  ApplyImages(objects, k["images"], dir);
}

}  // namespace

std::vector<nlohmann::json> LoadJsonDocuments(const std::string& path) {
  std::vector<nlohmann::json> docs;
  for (const YAML::Node& doc : YAML::LoadAllFromFile(path)) {
    if (!doc.IsNull()) docs.push_back(ToJson(doc));
  }
  return docs;
}

std::vector<nlohmann::json> RenderKustomization(const std::string& dir) {
  std::vector<nlohmann::json> objects;
  Accumulate(dir, "Kustomization", objects);
  return objects;
}

nlohmann::json FindObject(const std::vector<nlohmann::json>& objects, const std::string& kind,
                          const std::string& name) {
  for (const nlohmann::json& object : objects) {
    if (Kind(object) == kind && Name(object) == name) return object;
  }
  return nullptr;
}

double ParseQuantity(const std::string& quantity) {
  static const std::map<std::string, double> units = {
      {"", 1},          {"k", 1e3},   {"M", 1e6},   {"G", 1e9},   {"T", 1e12},
      {"Ki", 1024.0},   {"Mi", 1048576.0}, {"Gi", 1073741824.0}, {"Ti", 1099511627776.0},
  };
  const std::size_t end = quantity.find_first_not_of("0123456789.");
  const std::string number = quantity.substr(0, end);
  const std::string unit = end == std::string::npos ? "" : quantity.substr(end);
  const auto it = units.find(unit);
  if (number.empty() || it == units.end()) return std::numeric_limits<double>::quiet_NaN();
  char* stop = nullptr;
  const double value = std::strtod(number.c_str(), &stop);
  if (*stop != '\0') return std::numeric_limits<double>::quiet_NaN();
  return value * it->second;
}

}  // namespace attnscope::deploy::testing
