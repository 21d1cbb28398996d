#pragma once
// CTC greedy decoding for PP-OCR recognizers: per time step take the best class, merge
// repeats, drop blanks. Class 0 is the blank, classes 1..n are the dictionary's lines, and
// class n + 1 is a space.

#include <filesystem>
#include <string>
#include <vector>

namespace redwood {

struct CtcResult {
  std::string text;
  float score = 0.f;  // mean probability of the kept characters (0 when none)
};

class CtcDictionary {
 public:
  /// Reads one character (UTF-8) per line; throws IoError naming the file.
  explicit CtcDictionary(const std::filesystem::path& file);
  explicit CtcDictionary(std::vector<std::string> characters) : chars_(std::move(characters)) {}
  /// Classes the recognizer must output: blank + characters + space.
  std::size_t classes() const { return chars_.size() + 2; }
  /// Decodes one [steps, classes] row-major probability matrix.
  CtcResult decode(const float* probs, std::size_t steps, std::size_t classes) const;

 private:
  std::vector<std::string> chars_;
};

}  // namespace redwood
