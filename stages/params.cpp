#include "stages/params.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace redwood {

std::string ConfigOrigin::where(const YAML::Node& node) const {
  for (const auto& [n, text] : overrides) {
    if (n.is(node)) return text;
  }
  const YAML::Mark mark = node.Mark();
  if (mark.is_null()) return file.string();
  return fmt::format("{}:{}:{}", file.string(), mark.line + 1, mark.column + 1);
}

std::filesystem::path ConfigOrigin::resolve(const std::string& path) const {
  const std::filesystem::path p(path);
  if (p.is_absolute() || file.empty()) return p;
  return file.parent_path() / p;
}

void ConfigOrigin::fail(const YAML::Node& node, const std::string& message) const {
  throw ConfigError(fmt::format("{}: {}", where(node), message));
}

Params::Params(YAML::Node node, std::shared_ptr<const ConfigOrigin> origin, std::string what)
    : node_(std::move(node)), origin_(std::move(origin)), what_(std::move(what)) {
  if (!node_.IsMap()) origin_->fail(node_, what_ + ": expected a map of settings");
}

bool Params::has(const std::string& key) const {
  known_.insert(key);
  const YAML::Node v = node_[key];
  return v && !v.IsNull();
}

std::string Params::choice(const std::string& key, const std::string& fallback,
                           const std::vector<std::string>& choices) {
  const auto value = get<std::string>(key, fallback);
  if (std::find(choices.begin(), choices.end(), value) == choices.end()) {
    fail(key, fmt::format("'{}' is not one of {}", value, fmt::join(choices, ", ")));
  }
  return value;
}

std::set<std::string> Params::string_set(const std::string& key) {
  const auto list = get<std::vector<std::string>>(key, {});
  if (has(key) && list.empty()) fail(key, "expected a non-empty list (leave the key out for all)");
  return {list.begin(), list.end()};
}

std::filesystem::path Params::existing_file(const std::string& key) {
  const auto text = require<std::string>(key);
  const auto path = origin_->resolve(text);
  // The error_code form: a path the system cannot even look up (too long, say) is the same
  // located error, not std::filesystem_error.
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    fail(key, ec ? fmt::format("cannot look up '{}' ({}): {}", text, path.string(), ec.message())
                 : fmt::format("no such file '{}' ({})", text, path.string()));
  }
  return path;
}

YAML::Node Params::node(const std::string& key) {
  known_.insert(key);
  return node_[key];
}

void Params::fail(const std::string& key, const std::string& message) const {
  // Look the key up without creating it (a const node never inserts).
  const YAML::Node& self = node_;
  for (const auto& kv : self) {
    if (kv.first.as<std::string>() == key) origin_->fail(kv.second, fmt::format("{}: {}: {}", what_, key, message));
  }
  origin_->fail(node_, fmt::format("{}: {}", what_, message));
}

void Params::finish() const {
  for (const auto& kv : node_) {
    const auto key = kv.first.as<std::string>();
    if (!known_.count(key)) {
      origin_->fail(kv.first, fmt::format("{}: unknown key '{}' (known: {})", what_, key, fmt::join(known_, ", ")));
    }
  }
}

namespace detail {
std::string type_name_for_config(const std::type_info& type) {
  if (type == typeid(int) || type == typeid(long) || type == typeid(long long) || type == typeid(std::int64_t)) return "an integer";
  if (type == typeid(float) || type == typeid(double)) return "a number";
  if (type == typeid(bool)) return "true or false";
  if (type == typeid(std::string)) return "a string";
  if (type == typeid(std::vector<float>) || type == typeid(std::vector<double>)) return "a list of numbers";
  if (type == typeid(std::vector<int>)) return "a list of integers";
  if (type == typeid(std::vector<std::string>)) return "a list of strings";
  return "a value of another type";
}
}  // namespace detail

}  // namespace redwood
