// `redwood plan --cache-info [MODEL]` (plan_cache_info.hpp): the plan cache's folder, its
// entries, and a model's entry for this machine. Works in a build without CUDA too: it then lists
// the files and matches a model's entries by its hash, saying that it cannot tell this machine's.

#include "apps/redwood/plan_cache_info.hpp"

#include "core/error.hpp"
#include "core/graph/graph_hash.hpp"
#include "core/mapped_file.hpp"
#include "core/onnx/model_cache.hpp"
#include "core/onnx/onnx_import.hpp"
#include "runtime/placement_cache.hpp"
#include "runtime/plan_cache.hpp"
#include "redwood/config.hpp"

#if REDWOOD_HAVE_CUDA
#include "backends/cuda/plan_cache.hpp"
#endif

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <vector>

namespace redwood::app {
namespace {

namespace fs = std::filesystem;

struct Listed {
  fs::path file;
  std::uintmax_t bytes = 0;
  runtime::EntryRead read;  // the file's own checks (layout, key fields, picks' shape)
};

// The regular files of `dir` whose names end in `extension`, by name (none when there is no folder).
std::vector<fs::path> files_with_extension(const fs::path& dir, const std::string& extension) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.is_regular_file(ec) && e.path().extension() == extension) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::uintmax_t file_bytes(const fs::path& file) {
  std::error_code ec;
  const std::uintmax_t n = fs::file_size(file, ec);
  return ec ? 0 : n;
}

std::vector<Listed> list_entries(const fs::path& dir) {
  std::vector<Listed> entries;
  for (const fs::path& file : files_with_extension(dir, ".json")) {
    entries.push_back({file, file_bytes(file), runtime::read_plan_cache_entry(file, nullptr, {})});
  }
  return entries;
}

// A kept placement's "whole on cuda", or for a split its nodes' devices and its host segments'
// threads: "split: 3 node(s) on cpu, 213 node(s) on cuda; host segments on 4, 4, 8 thread(s)".
std::string where_placed(const nlohmann::json& j) {
  if (!j.contains("nodes")) return fmt::format("whole on {}", j.at("device").get<std::string>());
  std::map<std::string, int> count;
  for (const auto& d : j.at("nodes")) count[d.get<std::string>()]++;
  std::string where = "split:";
  for (const auto& [device, n] : count) where += fmt::format("{} {} node(s) on {}", where == "split:" ? "" : ",", n, device);
  if (j.contains("threads") && !j.at("threads").empty()) {
    std::vector<std::string> threads;
    for (const auto& t : j.at("threads")) threads.push_back(t.get<int>() > 0 ? std::to_string(t.get<int>()) : "all");
    where += fmt::format("; host segments on {} thread(s)", fmt::join(threads, ", "));
  }
  return where;
}

std::string size_text(std::uintmax_t bytes) {
  if (bytes < 1024) return fmt::format("{} B", bytes);
  if (bytes < (1u << 20)) return fmt::format("{:.1f} KiB", static_cast<double>(bytes) / 1024);
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1u << 20));
}

std::string options_text(const std::map<std::string, std::string>& options) {
  std::string out;
  for (const auto& [name, value] : options) out += fmt::format("{}{}={}", out.empty() ? "" : " ", name, value);
  return out;
}

// "54: conv 3, conv_nhwc 40, depthwise_nhwc 11 (52 measured, 2 left at the default by a spent budget)"
std::string picks_text(const runtime::PickSet& picks) {
  std::string per_tuner;
  std::size_t defaults = 0;
  for (const auto& [tuner, by_key] : picks.tuners()) {
    per_tuner += fmt::format("{}{} {}", per_tuner.empty() ? "" : ", ", tuner, by_key.size());
    for (const auto& [key, pick] : by_key) defaults += pick.value("how", "") == "default" ? 1 : 0;
  }
  return fmt::format("{}{}{} ({} measured, {} left at the default by a spent budget)", picks.size(),
                     per_tuner.empty() ? "" : ": ", per_tuner, picks.size() - defaults, defaults);
}

void print_entry(const Listed& e) {
  fmt::print("{}  {}\n", e.file.filename().string(), size_text(e.bytes));
  if (!e.read.entry) {
    fmt::print("  not usable: {}\n", e.read.problem);
    return;
  }
  const runtime::PlanCacheEntry& entry = *e.read.entry;
  fmt::print("  model    {} (hash {})\n", entry.model.empty() ? "?" : entry.model, entry.key.model_hash);
  fmt::print("  device   {}; driver {}; {}\n", entry.key.device, entry.key.driver, entry.key.runtime);
  fmt::print("  redwood  {}\n", entry.key.redwood);
  fmt::print("  options  {}\n", options_text(entry.key.options));
  fmt::print("  picks    {}\n", picks_text(entry.picks));
  std::error_code ec;
  fs::path graph = e.file;
  graph.replace_extension(".rwgraph");
  if (fs::is_regular_file(graph, ec)) fmt::print("  graph    the optimized graph, {}\n", size_text(file_bytes(graph)));
  fmt::print("  written  {}\n", entry.created);
}

// This machine's key without model and options, or why there is none.
std::optional<runtime::PlanCacheKey> machine_key(std::string* why) {
#if REDWOOD_HAVE_CUDA
  try {
    return cuda::plan_cache_key("", cuda::RunnerOptions{}, 0);
  } catch (const Error& e) {
    *why = e.what();
    return std::nullopt;
  }
#else
  *why = "this launcher is built without CUDA";
  return std::nullopt;
#endif
}

runtime::PickCheck pick_check() {
#if REDWOOD_HAVE_CUDA
  return [](const std::string& tuner, const nlohmann::json& pick) { cuda::check_tuned_pick(tuner, pick, 0); };
#else
  return {};
#endif
}

// A model's entries: which are this machine's, and whether those pass every check here.
void print_model(const std::string& model, const std::vector<Listed>& entries) {
  const auto start = std::chrono::steady_clock::now();
  const std::shared_ptr<Graph> graph = load_onnx(model, OnnxImportOptions{.cache = true});
  const auto hashed = std::chrono::steady_clock::now();
  const std::string hash = hash_hex(graph_hash(*graph));
  const double hash_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - hashed).count();
  const double load_ms = std::chrono::duration<double, std::milli>(hashed - start).count();
  const std::string file_name = fs::path(model).filename().string();
  fmt::print("\nmodel {}\n  hash {} (its nodes, attributes and weights; loaded in {:.0f} ms, hashed in {:.1f} ms)\n",
             model, hash, load_ms, hash_ms);
  const fs::path imported = model_cache_file(model_cache_dir(), MappedFile::open(model)->bytes(), OnnxImportOptions{.cache = true});
  std::error_code ec;
  if (fs::is_regular_file(imported, ec)) {
    fmt::print("  model cache: {}, {}\n", imported.filename().string(), size_text(file_bytes(imported)));
  } else {
    fmt::print("  model cache: no entry (a model with external data is not kept, or the folder cannot be written)\n");
  }
  std::string why;
  const std::optional<runtime::PlanCacheKey> machine = machine_key(&why);
  if (machine) {
    fmt::print("  this machine: {}; driver {}; {}; Redwood {}\n", machine->device, machine->driver, machine->runtime,
               machine->redwood);
  } else {
    fmt::print("  this machine: unknown: {}; its entries are matched by the model's hash alone\n", why);
  }
  std::size_t valid_here = 0, of_model = 0;
  for (const Listed& e : entries) {
    if (!e.read.entry) {  // its file name still says whose it was
      if (e.file.filename().string().rfind(hash + "-", 0) == 0) {
        ++of_model;
        fmt::print("  {}: not usable (it is rebuilt on the next run): {}\n", e.file.filename().string(), e.read.problem);
      }
      continue;
    }
    const runtime::PlanCacheKey& key = e.read.entry->key;
    if (key.model_hash != hash) {
      if (e.read.entry->model == file_name) {
        fmt::print("  {}: stale: made for a model of the same file name and other content (hash {})\n",
                   e.file.filename().string(), key.model_hash);
      }
      continue;
    }
    ++of_model;
    if (!machine) {
      fmt::print("  {}: options {}, {} picks (not checked against this machine)\n", e.file.filename().string(),
                 options_text(key.options), e.read.entry->picks.size());
      continue;
    }
    runtime::PlanCacheKey expected = *machine;
    expected.model_hash = hash;
    expected.options = key.options;  // an entry per set of options: each is this machine's if the rest matches
    if (const std::string other = expected.difference(key); !other.empty()) {
      fmt::print("  {}: made for another machine or version ({})\n", e.file.filename().string(), other);
      continue;
    }
    const runtime::EntryRead checked = runtime::read_plan_cache_entry(e.file, &expected, pick_check());
    if (checked.entry) {
      ++valid_here;
      fmt::print("  {}: valid here: options {}, {} picks\n", e.file.filename().string(), options_text(key.options),
                 checked.entry->picks.size());
    } else {
      fmt::print("  {}: for this machine, not usable (it is rebuilt on the next run): {}\n",
                 e.file.filename().string(), checked.problem);
    }
  }
  if (of_model == 0) {
    fmt::print("  no entry for this model: its first tuned GPU run makes one\n");
  } else if (machine && valid_here == 0) {
    fmt::print("  no valid entry for this machine: the next tuned GPU run makes one\n");
  }
}

}  // namespace

int print_plan_cache_info(const std::string& model_or_empty) {
  const fs::path dir = runtime::plan_cache_dir();
  const std::vector<Listed> entries = list_entries(dir);
  std::uintmax_t bytes = 0;
  for (const Listed& e : entries) bytes += e.bytes;
  std::error_code ec;
  if (fs::is_directory(dir, ec)) {
    fmt::print("plan cache: {}: {} entr{}, {}\n", dir.string(), entries.size(), entries.size() == 1 ? "y" : "ies",
               size_text(bytes));
  } else {
    fmt::print("plan cache: {}: not made yet (the first tuned GPU run makes it; REDWOOD_CACHE_DIR moves it)\n",
               dir.string());
  }
  for (const Listed& e : entries) print_entry(e);

  const fs::path models = model_cache_dir();
  const std::vector<fs::path> imported = files_with_extension(models, ".rwgraph");
  std::uintmax_t model_bytes = 0;
  for (const fs::path& file : imported) model_bytes += file_bytes(file);
  if (fs::is_directory(models, ec)) {
    fmt::print("model cache: {}: {} imported model{}, {}\n", models.string(), imported.size(),
               imported.size() == 1 ? "" : "s", size_text(model_bytes));
    for (const fs::path& file : imported) fmt::print("{}  {}\n", file.filename().string(), size_text(file_bytes(file)));
  } else {
    fmt::print("model cache: {}: not made yet (the first load of a model by the launcher makes it)\n", models.string());
  }

  // The placement cache (runtime/placement_cache.hpp): where pipelines' `device: auto` models went.
  const fs::path placements = runtime::placement_cache_dir();
  const std::vector<fs::path> kept = files_with_extension(placements, ".json");
  if (fs::is_directory(placements, ec)) {
    fmt::print("placement cache: {}: {} placement{}\n", placements.string(), kept.size(), kept.size() == 1 ? "" : "s");
    for (const fs::path& file : kept) {
      try {
        std::ifstream in(file);
        const nlohmann::json j = nlohmann::json::parse(in);
        if (j.contains("models")) {  // a pipeline's device: auto models, placed together
          std::string models;
          for (const auto& m : j.at("models")) {
            models += fmt::format("{}'{}' {}, batch {} frame(s), predicted {:.3f} ms a batch{}", models.empty() ? "" : "; ",
                                  m.at("name").get<std::string>(), where_placed(m), m.at("batch_frames").get<int>(),
                                  m.at("predicted_batch_ms").get<double>(), m.at("measured").get<bool>() ? " (measured)" : "");
          }
          fmt::print("{}  pipeline: {}\n", file.filename().string(), models);
          continue;
        }
        fmt::print("{}  {}, predicted {:.3f} ms a batch; {}\n", file.filename().string(), where_placed(j),
                   j.at("predicted_ms").get<double>(), j.at("key").get<std::string>());
      } catch (const std::exception& e) {
        fmt::print("{}  not usable (placed again on the next run): {}\n", file.filename().string(), e.what());
      }
    }
  } else {
    fmt::print("placement cache: {}: not made yet (a pipeline's device: auto model, once placed, makes it)\n",
               placements.string());
  }
  if (!model_or_empty.empty()) print_model(model_or_empty, entries);
  return 0;
}

}  // namespace redwood::app
