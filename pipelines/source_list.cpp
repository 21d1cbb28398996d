// Source entries that list their streams in a file (pipelines/source_list.hpp).

#include "pipelines/source_list.hpp"

#include <fmt/format.h>

#include <fstream>
#include <map>
#include <sstream>

namespace redwood {

namespace {

/// The key a line's value goes to, per source type ("": the line is a name alone).
const std::map<std::string, std::string>& list_keys() {
  static const std::map<std::string, std::string> keys{
      {"stream", "url"}, {"video", "path"}, {"images", "path"}, {"synthetic", ""}};
  return keys;
}

}  // namespace

std::vector<SourceEntry> expand_source_entry(const YAML::Node& entry, const std::shared_ptr<const ConfigOrigin>& origin,
                                             const std::string& name, const std::string& type) {
  if (!entry["list"]) return {{name, entry, origin, origin->where(entry)}};
  Params p(entry, origin, fmt::format("source '{}'", name));
  const auto keys = list_keys().find(type);
  if (keys == list_keys().end()) {
    p.fail("list", fmt::format("a source of type '{}' takes no list (list works for stream, video, images and "
                               "synthetic sources)",
                               type));
  }
  const std::string& key = keys->second;
  if (!key.empty() && p.has(key)) p.fail(key, fmt::format("give either '{}' or 'list' (a file of them), not both", key));
  const std::filesystem::path list = p.existing_file("list");
  std::ifstream in(list);
  if (!in) p.fail("list", fmt::format("cannot read '{}'", list.string()));

  std::vector<SourceEntry> out;
  std::map<std::string, int> lines;  // name -> its line, for duplicates
  std::string text;
  for (int number = 1; std::getline(in, text); ++number) {
    std::istringstream fields(text);
    std::vector<std::string> words;
    for (std::string w; fields >> w;) words.push_back(w);
    if (words.empty() || words[0][0] == '#') continue;
    const std::string where = fmt::format("{}:{}", list.string(), number);
    const std::size_t most = key.empty() ? 1 : 2;
    if (words.size() > most) {
      throw ConfigError(fmt::format("{}: source '{}': expected {}, got {} fields", where, name,
                                    key.empty() ? "a NAME alone (synthetic sources take no URL)"
                                                : fmt::format("'NAME {}' or '{}'", key == "url" ? "URL" : "PATH",
                                                              key == "url" ? "URL" : "PATH"),
                                    words.size()));
    }
    const std::string stream = words.size() == 2 || key.empty() ? words[0] : fmt::format("{}-{}", name, number);
    if (const auto [it, fresh] = lines.emplace(stream, number); !fresh) {
      throw ConfigError(fmt::format("{}: source '{}': a second stream named '{}' (the first is at line {})", where, name,
                                    stream, it->second));
    }
    // A copy of the entry with the line's name and value in place of `list`. Its origin is the
    // list file (relative paths resolve against its folder); the keys copied from the entry still
    // name their place in the pipeline file, the line's own values the line.
    YAML::Node node = YAML::Clone(entry);
    node.remove("list");
    node["name"] = stream;
    auto line_origin = std::make_shared<ConfigOrigin>();
    line_origin->file = list;
    for (const auto& kv : entry) {
      const std::string k = kv.first.Scalar();
      if (k != "list" && k != "name") line_origin->overrides.emplace_back(node[k], origin->where(kv.second));
    }
    if (!key.empty()) node[key] = words.back();
    line_origin->overrides.emplace_back(node, where);
    line_origin->overrides.emplace_back(node["name"], where);
    if (!key.empty()) line_origin->overrides.emplace_back(node[key], where);
    out.push_back({stream, node, line_origin, where});
  }
  if (out.empty()) p.fail("list", fmt::format("'{}' lists no stream (each line: NAME URL, or URL; # starts a comment)", list.string()));
  return out;
}

}  // namespace redwood
