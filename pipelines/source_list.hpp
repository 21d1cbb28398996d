#pragma once
// Many streams in one file: a source entry of a pipeline file may name a list file instead of
// one URL or path,
//
//   sources:
//     - {name: cams, type: stream, list: cameras.txt, read_timeout_ms: 3000}
//
// and stands for one source per non-empty line that is not a comment (#): "NAME URL", or just
// "URL" (named "<entry>-<line number>"). Each gets the entry's other keys; the line's value goes
// to the key its type takes (stream: url; video, images: path, relative to the list file's
// folder; synthetic: a line is a NAME alone). Mistakes name the list file and line.

#include "stages/params.hpp"

#include <memory>
#include <string>
#include <vector>

namespace redwood {

/// One source of `sources:`, as its factory will read it.
struct SourceEntry {
  std::string name;
  YAML::Node node;                              // the entry itself, or a copy made for a list line
  std::shared_ptr<const ConfigOrigin> origin;   // where its keys were written
  std::string where;                            // "pipeline.yaml:7:5" or "cameras.txt:3"
};

/// The sources an entry (a map with name and type, already checked) stands for: itself, or one
/// per line of its `list` file. Throws ConfigError at the entry or at the list's line.
std::vector<SourceEntry> expand_source_entry(const YAML::Node& entry, const std::shared_ptr<const ConfigOrigin>& origin,
                                             const std::string& name, const std::string& type);

}  // namespace redwood
