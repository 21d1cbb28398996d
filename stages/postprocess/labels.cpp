#include "stages/postprocess/labels.hpp"

#include "stages/params.hpp"

#include <fmt/format.h>

#include <fstream>

namespace redwood {

std::vector<std::string> read_labels(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError(fmt::format("{}: cannot read the labels file", path.string()));
  std::vector<std::string> labels;
  int empty_line = 0;  // the first empty line, an error unless only empty lines follow it
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos) {
      if (empty_line == 0) empty_line = number;
      continue;
    }
    if (empty_line != 0) {
      throw ConfigError(fmt::format("{}:{}: empty label (each line is a class, in id order; an empty line would shift the ids)",
                                    path.string(), empty_line));
    }
    const auto last = line.find_last_not_of(" \t\r");
    labels.push_back(line.substr(first, last - first + 1));
  }
  if (labels.empty()) throw ConfigError(fmt::format("{}: the labels file holds no label", path.string()));
  return labels;
}

std::vector<std::string> read_labels(Params& params, const std::string& key) {
  if (!params.has(key)) return {};
  const auto file = params.existing_file(key);
  try {
    return read_labels(file);
  } catch (const ConfigError& e) {
    params.fail(key, e.what());
  }
}

std::string label_of(const std::vector<std::string>& labels, int id) {
  if (id >= 0 && static_cast<std::size_t>(id) < labels.size()) return labels[static_cast<std::size_t>(id)];
  return std::to_string(id);
}

}  // namespace redwood
