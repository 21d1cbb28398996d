#pragma once
// Params: a YAML map read by one part of a pipeline (a source, a stage, a sink) with every
// mistake reported at its place in the file. Each get() marks its key as known; finish() then
// rejects whatever key nobody asked for, so a typo is an error at load, never silently ignored.
//
//   Params p(node, origin, "stage 'det'");
//   const int width = p.get<int>("width", 640);   // "ocr.yaml:12:12: stage 'det': width: expected an integer, got 'wide'"
//   p.finish();                                    // "ocr.yaml:14:5: stage 'det': unknown key 'widht' (known: ...)"

#include "core/error.hpp"

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <typeinfo>
#include <vector>

namespace redwood {

/// A mistake in a pipeline file; the message starts with file:line:column.
class ConfigError : public InvalidArgument {
 public:
  using InvalidArgument::InvalidArgument;
};

/// The file a configuration came from and the values overridden on the command line, so that an
/// error can name where a value was written.
struct ConfigOrigin {
  std::filesystem::path file;
  std::vector<std::pair<YAML::Node, std::string>> overrides;  // node, "--set a.b=c"

  /// "file:line:col" (1-based), or "--set a.b=c" for an overridden value.
  std::string where(const YAML::Node& node) const;
  /// Resolves a path written in the file against the file's folder.
  std::filesystem::path resolve(const std::string& path) const;
  [[noreturn]] void fail(const YAML::Node& node, const std::string& message) const;
};

class Params {
 public:
  Params(YAML::Node node, std::shared_ptr<const ConfigOrigin> origin, std::string what);

  bool has(const std::string& key) const;
  /// The value at key converted to T, or fallback when absent.
  template <typename T>
  T get(const std::string& key, T fallback);
  /// The value at key converted to T; absent is an error.
  template <typename T>
  T require(const std::string& key);
  /// One of `choices` (a string).
  std::string choice(const std::string& key, const std::string& fallback, const std::vector<std::string>& choices);
  /// A filter list (`kinds: [face]`, `classes: [person, car]`) as a set: empty when the key is
  /// absent (everything passes); an empty list written out is an error.
  std::set<std::string> string_set(const std::string& key);
  /// A path relative to the config file's folder that must exist.
  std::filesystem::path existing_file(const std::string& key);
  /// The raw node at key (marked as known).
  YAML::Node node(const std::string& key);

  /// Errors at the key (or at this map when the key is absent).
  [[noreturn]] void fail(const std::string& key, const std::string& message) const;
  /// Errors on every key no get() asked for.
  void finish() const;

  const std::string& what() const { return what_; }
  const ConfigOrigin& origin() const { return *origin_; }
  const YAML::Node& self() const { return node_; }

 private:
  template <typename T>
  T convert(const std::string& key, const YAML::Node& value) const;

  YAML::Node node_;
  std::shared_ptr<const ConfigOrigin> origin_;
  std::string what_;
  mutable std::set<std::string> known_;
};

namespace detail {
std::string type_name_for_config(const std::type_info& type);
}

template <typename T>
T Params::convert(const std::string& key, const YAML::Node& value) const {
  try {
    if constexpr (std::is_same_v<T, std::string>) {
      if (!value.IsScalar()) throw YAML::Exception(value.Mark(), "");
    }
    return value.as<T>();
  } catch (const YAML::Exception&) {
    std::string got = value.IsScalar() ? "'" + value.Scalar() + "'" : value.IsMap() ? "a map" : value.IsSequence() ? "a list" : "nothing";
    fail(key, "expected " + detail::type_name_for_config(typeid(T)) + ", got " + got);
  }
}

template <typename T>
T Params::get(const std::string& key, T fallback) {
  known_.insert(key);
  const YAML::Node value = node_[key];
  if (!value || value.IsNull()) return fallback;
  return convert<T>(key, value);
}

template <typename T>
T Params::require(const std::string& key) {
  known_.insert(key);
  const YAML::Node value = node_[key];
  if (!value || value.IsNull()) fail(key, "missing required key '" + key + "'");
  return convert<T>(key, value);
}

}  // namespace redwood
