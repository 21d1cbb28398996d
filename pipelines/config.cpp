#include "pipelines/config.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

#include <charconv>
#include <fstream>
#include <set>
#include <sstream>

namespace redwood {

namespace {

// yaml-cpp keeps both entries of a key given twice in one map and reads the first: a second
// `threads:` would be silently ignored. Refused at its line instead, as is a key that is a list or
// a map (`[a, b]: 1`), which every reader of the file would otherwise meet as yaml-cpp's own
// conversion error.
void refuse_duplicate_keys(const YAML::Node& node, const std::filesystem::path& file) {
  if (node.IsMap()) {
    std::set<std::string> seen;
    for (const auto& kv : node) {
      if (!kv.first.IsScalar() && !kv.first.IsNull()) {
        throw ConfigError(fmt::format("{}:{}:{}: a key is a name, not a list or a map", file.string(),
                                      kv.first.Mark().line + 1, kv.first.Mark().column + 1));
      }
      if (kv.first.IsScalar() && !seen.insert(kv.first.Scalar()).second) {
        throw ConfigError(fmt::format("{}:{}:{}: key '{}' is given twice in this map", file.string(),
                                      kv.first.Mark().line + 1, kv.first.Mark().column + 1, kv.first.Scalar()));
      }
      refuse_duplicate_keys(kv.second, file);
    }
  } else if (node.IsSequence()) {
    for (const auto& item : node) refuse_duplicate_keys(item, file);
  }
}

}  // namespace

PipelineFile parse_pipeline_text(const std::string& text, const std::filesystem::path& file,
                                 const std::vector<std::string>& overrides) {
  PipelineFile pf;
  pf.origin = std::make_shared<ConfigOrigin>();
  pf.origin->file = file;
  try {
    pf.root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw ConfigError(fmt::format("{}:{}:{}: {}", file.string(), e.mark.line + 1, e.mark.column + 1, e.msg));
  }
  refuse_duplicate_keys(pf.root, file);
  if (!pf.root.IsMap()) throw ConfigError(fmt::format("{}: a pipeline file is a map (version, sources, models, stages, sinks)", file.string()));
  for (const auto& o : overrides) apply_override(pf, o);
  return pf;
}

PipelineFile load_pipeline_file(const std::filesystem::path& file, const std::vector<std::string>& overrides) {
  std::ifstream in(file);
  RW_EXPECTS(in, IoError, "{}: cannot read the pipeline file", file.string());
  std::stringstream text;
  text << in.rdbuf();
  return parse_pipeline_text(text.str(), file, overrides);
}

void apply_override(PipelineFile& pf, const std::string& assignment) {
  const std::string where = "--set " + assignment;
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) throw ConfigError(where + ": expected KEY.PATH=VALUE");
  std::vector<std::string> parts;
  std::stringstream path(assignment.substr(0, eq));
  for (std::string part; std::getline(path, part, '.');) {
    if (part.empty()) throw ConfigError(where + ": empty part in the key path");
    parts.push_back(part);
  }
  YAML::Node value;
  try {
    value = YAML::Load(assignment.substr(eq + 1));
  } catch (const YAML::Exception& e) {
    throw ConfigError(fmt::format("{}: the value is not valid YAML: {}", where, e.msg));
  }
  refuse_duplicate_keys(value, where);
  YAML::Node node = pf.root;
  std::string walked;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const std::string& part = parts[i];
    const bool last = i + 1 == parts.size();
    walked += (walked.empty() ? "" : ".") + part;
    if (node.IsSequence()) {
      YAML::Node found;
      bool matched = false;
      for (std::size_t k = 0; k < node.size() && !matched; ++k) {
        YAML::Node element = node[k];
        // A name that is a list or a map matches nothing (as<std::string> would throw yaml-cpp's own error).
        if (element.IsMap() && element["name"] && element["name"].IsScalar() && element["name"].Scalar() == part) {
          found.reset(element);
          matched = true;
        }
      }
      // An index: digits only, below the list's size (from_chars: 99999999999999999999 is no index,
      // where std::stoul threw std::out_of_range).
      std::size_t index = 0;
      const auto [rest, ec] = std::from_chars(part.data(), part.data() + part.size(), index);
      if (!matched && ec == std::errc() && rest == part.data() + part.size() && index < node.size()) {
        found.reset(node[index]);
        matched = true;
      }
      if (!matched) throw ConfigError(fmt::format("{}: no element named '{}' in '{}'", where, part, walked));
      if (last) throw ConfigError(fmt::format("{}: '{}' is a whole list element; set one of its keys", where, walked));
      node.reset(found);
    } else if (node.IsMap() || node.IsNull()) {
      if (last) {
        node[part] = value;
        pf.origin->overrides.emplace_back(node[part], where);
        return;
      }
      if (!node[part]) node[part] = YAML::Node(YAML::NodeType::Map);
      YAML::Node next = node[part];
      node.reset(next);
    } else {
      throw ConfigError(fmt::format("{}: '{}' is a value, it has no keys", where, walked));
    }
  }
}

}  // namespace redwood
