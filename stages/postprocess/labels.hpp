#pragma once
// Class labels for detectors and classifiers: a text file with one label per line, the line's
// number (from 0) being the class id, as the COCO and ImageNet label files ship. Surrounding
// spaces and a trailing "\r" are trimmed; an empty line is an error (it would shift every id after
// it), except at the end of the file.

#include <filesystem>
#include <string>
#include <vector>

namespace redwood {

class Params;

/// Reads a labels file; throws ConfigError naming "file:line" for an empty label, or the file when
/// it cannot be read or holds no label.
std::vector<std::string> read_labels(const std::filesystem::path& path);

/// The labels file at a stage's key (relative to the config file): empty when the key is absent;
/// a missing or malformed file fails at the key's place in the config.
std::vector<std::string> read_labels(Params& params, const std::string& key);

/// The label of class `id`: labels[id], or the id as text when there is none.
std::string label_of(const std::vector<std::string>& labels, int id);

}  // namespace redwood
