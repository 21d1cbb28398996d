// Fuzz target: pipeline files, as `redwood run CONFIG [--set k=v]...` loads them:
// parse_pipeline_text (YAML, duplicate keys, the top level a map), apply_override for every
// line of the input that starts with "#set " (a YAML comment, so the file stays valid YAML:
// "#set stages.det.max_batch=4" is `--set stages.det.max_batch=4`), then the Pipeline
// constructor: every section read through Params, sources, models loaded (import, optimizer,
// runners), stages made and their contracts checked against each other.
//
// The constructor only runs on files that name nothing outside this target's own folder, which
// holds text_det.onnx and text_rec.onnx (copied from the onnx_import corpus) and keys.txt:
// every source is `synthetic` (the others open files, cameras and network streams), no string
// in the file holds a path separator or is "." or "..", and the `sinks` section is left out
// (sinks bind ZeroMQ ports and write files). Other files are parsed and overridden only.
// Nothing runs: Pipeline::run is not called.

#include "core/error.hpp"
#include "core/log.hpp"
#include "fuzz/fuzz_target.hpp"
#include "pipelines/config.hpp"
#include "pipelines/pipeline.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

fs::path g_folder;

// Whether building the pipeline stays inside g_folder (see the header comment).
bool hermetic(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Scalar: {
      const std::string& s = node.Scalar();
      return s.find('/') == std::string::npos && s.find('\\') == std::string::npos && s != "." && s != "..";
    }
    case YAML::NodeType::Sequence:
      for (const auto& item : node) {
        if (!hermetic(item)) return false;
      }
      return true;
    case YAML::NodeType::Map:
      for (const auto& kv : node) {
        if (!hermetic(kv.first) || !hermetic(kv.second)) return false;
      }
      return true;
    default:
      return true;
  }
}

bool only_synthetic_sources(const YAML::Node& root) {
  const YAML::Node sources = root["sources"];
  if (!sources || !sources.IsSequence()) return true;  // the constructor's own error
  for (const auto& s : sources) {
    if (!s.IsMap() || !s["type"] || !s["type"].IsScalar() || s["type"].Scalar() != "synthetic") return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  redwood::set_log_level("off");
  char folder[] = "/tmp/redwood-fuzz-pipeline-XXXXXX";
  if (!::mkdtemp(folder)) std::abort();
  g_folder = folder;
  const fs::path models = fs::path(REDWOOD_FUZZ_CORPUS_DIR) / "onnx_import";
  fs::copy_file(models / "text_det.onnx", g_folder / "text_det.onnx");
  fs::copy_file(models / "text_rec.onnx", g_folder / "text_rec.onnx");
  std::ofstream(g_folder / "keys.txt") << "a\nb\nc\nd\n";
  std::atexit([] {
    std::error_code ec;
    fs::remove_all(g_folder, ec);
  });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> overrides;
  for (std::size_t at = 0; at < text.size();) {
    std::size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    if (text.compare(at, 5, "#set ") == 0) overrides.push_back(text.substr(at + 5, end - at - 5));
    at = end + 1;
  }
  try {
    redwood::PipelineFile file = redwood::parse_pipeline_text(text, g_folder / "fuzz.yaml", overrides);
    if (!hermetic(file.root) || !only_synthetic_sources(file.root)) return 0;
    file.root.remove("sinks");
    redwood::Pipeline pipeline(file);
  } catch (const redwood::Error&) {
  }
  return 0;
}
