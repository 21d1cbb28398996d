#include "conformance/onnx_conformance.hpp"

#include "core/error.hpp"
#include "runtime/executor.hpp"
#include "core/onnx/onnx_import.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>

namespace redwood::testing {

namespace {

// Tests of training-mode behaviour: Redwood is an inference runtime.
bool is_training_test(const std::string& name) {
  return name.find("training") != std::string::npos;
}

std::vector<std::filesystem::path> numbered_files(const std::filesystem::path& dir, const std::string& prefix) {
  std::vector<std::filesystem::path> files;
  for (int i = 0;; ++i) {
    const auto f = dir / (prefix + std::to_string(i) + ".pb");
    if (!std::filesystem::exists(f)) break;
    files.push_back(f);
  }
  return files;
}

// Compares like numpy.testing.assert_allclose; returns "" when equal, else what differs.
std::string compare(const Tensor& actual, const Tensor& expected, const std::string& name) {
  if (actual.dtype() != expected.dtype()) {
    return fmt::format("output '{}' is {}, expected {}", name, actual.description(), expected.description());
  }
  if (actual.shape() != expected.shape()) {
    return fmt::format("output '{}' has shape {}, expected {}", name, shape_str(actual.shape()),
                       shape_str(expected.shape()));
  }
  std::int64_t bad = 0, worst = -1;
  double worst_excess = 0;
  for (std::int64_t i = 0; i < expected.numel(); ++i) {
    const double a = actual.get_as_double(i);
    const double e = expected.get_as_double(i);
    if (std::isnan(e) || std::isnan(a)) {
      if (std::isnan(e) != std::isnan(a)) {
        ++bad;
        worst = i;
      }
      continue;
    }
    if (std::isinf(e) || std::isinf(a)) {
      if (a != e) {
        ++bad;
        worst = i;
      }
      continue;
    }
    const double excess = std::abs(a - e) - (kConformanceAtol + kConformanceRtol * std::abs(e));
    if (excess > 0) {
      ++bad;
      if (worst < 0 || excess > worst_excess) {
        worst = i;
        worst_excess = excess;
      }
    }
  }
  if (bad == 0) return "";
  return fmt::format("output '{}': {} of {} elements differ, e.g. [{}] = {} vs expected {}", name, bad,
                     expected.numel(), worst, actual.get_as_double(worst), expected.get_as_double(worst));
}

// The op types of a model, read straight from the protobuf (also for models Redwood cannot
// import), domain-qualified outside the default domain.
std::set<std::string> model_ops(const std::filesystem::path& file) {
  std::set<std::string> ops;
  std::ifstream in(file, std::ios::binary);
  onnx::ModelProto model;
  if (!model.ParseFromIstream(&in)) return ops;
  for (const auto& n : model.graph().node()) {
    const bool default_domain = n.domain().empty() || n.domain() == "ai.onnx";
    ops.insert(default_domain ? n.op_type() : n.domain() + "." + n.op_type());
  }
  return ops;
}

// Messages name files inside the test's folder; the table names the test, so drop the folder,
// and keep each reason on one line.
std::string short_reason(std::string message, const std::filesystem::path& dir) {
  const std::string prefix = dir.string() + "/";
  for (auto pos = message.find(prefix); pos != std::string::npos; pos = message.find(prefix)) {
    message.erase(pos, prefix.size());
  }
  for (auto pos = message.find("\n  "); pos != std::string::npos; pos = message.find("\n  ")) {
    message.replace(pos, 3, " ");
  }
  return message;
}

}  // namespace

std::vector<std::filesystem::path> list_node_tests(const std::filesystem::path& root) {
  std::vector<std::filesystem::path> dirs;
  if (!std::filesystem::is_directory(root)) return dirs;
  for (const auto& entry : std::filesystem::directory_iterator(root)) {
    if (entry.is_directory() && std::filesystem::exists(entry.path() / "model.onnx")) dirs.push_back(entry.path());
  }
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

ConformanceTarget executor_target(const ExecutorOptions& options, std::string label) {
  ConformanceTarget t;
  t.label = std::move(label);
  t.run = [options](std::shared_ptr<Graph> graph, const std::map<std::string, Tensor>& feeds) {
    Executor executor(std::move(graph), options);
    return executor.run(feeds);
  };
  t.has_op = [](const std::string& op) { return OpRegistry::instance().find(op, Device::kCpu) != nullptr; };
  return t;
}

ConformanceOutcome run_node_test(const std::filesystem::path& dir, const ConformanceTarget& target) {
  ConformanceOutcome out;
  out.test = dir.filename().string();
  const auto model_file = dir / "model.onnx";
  const std::set<std::string> ops = model_ops(model_file);
  out.group = ops.empty() ? "(no nodes)" : fmt::format("{}", fmt::join(ops, "+"));
  if (is_training_test(out.test)) {
    out.reason = "training-mode behaviour (Redwood runs inference only)";
    return out;
  }
  std::vector<std::string> missing;
  for (const auto& op : ops) {
    if (op != "Constant" && target.has_op && !target.has_op(op)) missing.push_back(op);
  }
  if (!missing.empty()) {
    out.reason = fmt::format("op {} not supported", fmt::join(missing, ", "));
    return out;
  }
  std::shared_ptr<Graph> graph;
  try {
    graph = load_onnx(model_file);
  } catch (const Unsupported& e) {
    out.reason = short_reason(e.what(), dir);
    return out;
  } catch (const Error& e) {
    out.status = ConformanceStatus::kFailed;
    out.reason = e.what();
    return out;
  }
  const auto data = dir / "test_data_set_0";
  std::map<std::string, Tensor> feeds;
  std::vector<Tensor> expected;
  try {
    // Inputs are numbered in the order of the graph's inputs (initializers excluded).
    const auto in_files = numbered_files(data, "input_");
    std::vector<std::string> names;
    for (const auto& vi : graph->inputs) names.push_back(vi.name);
    if (in_files.size() != names.size()) {
      out.status = ConformanceStatus::kFailed;
      out.reason = fmt::format("{} input files for {} graph inputs", in_files.size(), names.size());
      return out;
    }
    for (std::size_t i = 0; i < in_files.size(); ++i) feeds[names[i]] = load_onnx_tensor(in_files[i]);
    for (const auto& f : numbered_files(data, "output_")) expected.push_back(load_onnx_tensor(f));
  } catch (const Unsupported& e) {
    out.reason = short_reason(e.what(), dir);
    return out;
  }
  try {
    const std::vector<Tensor> actual = target.run(graph, feeds);
    if (actual.size() != expected.size()) {
      out.status = ConformanceStatus::kFailed;
      out.reason = fmt::format("{} outputs, expected {}", actual.size(), expected.size());
      return out;
    }
    for (std::size_t i = 0; i < actual.size(); ++i) {
      const std::string diff = compare(actual[i], expected[i], graph->outputs[i].name);
      if (!diff.empty()) {
        out.status = ConformanceStatus::kFailed;
        out.reason = diff;
        return out;
      }
    }
    out.status = ConformanceStatus::kPassed;
  } catch (const Unsupported& e) {
    out.status = ConformanceStatus::kSkipped;
    out.reason = short_reason(e.what(), dir);
  } catch (const std::exception& e) {
    out.status = ConformanceStatus::kFailed;
    out.reason = e.what();
  }
  return out;
}

int expect_conformance(const std::filesystem::path& root, const ConformanceTarget& target,
                       const std::vector<std::string>& required_ops) {
  const auto dirs = list_node_tests(root);
  if (dirs.empty()) {
    ADD_FAILURE() << "no ONNX node tests under " << root << ": install Debian's libonnx-testdata (scripts/setup.sh does)";
    return 0;
  }
  struct Row {
    int passed = 0, failed = 0, skipped = 0;
    std::set<std::string> reasons;
  };
  std::map<std::string, Row> rows;
  int passed = 0, failed = 0, skipped = 0;
  std::vector<std::string> failures;
  for (const auto& dir : dirs) {
    const ConformanceOutcome o = run_node_test(dir, target);
    Row& row = rows[o.group];
    switch (o.status) {
      case ConformanceStatus::kPassed:
        ++row.passed;
        ++passed;
        break;
      case ConformanceStatus::kFailed:
        ++row.failed;
        ++failed;
        failures.push_back(o.test + ": " + o.reason);
        break;
      case ConformanceStatus::kSkipped:
        ++row.skipped;
        ++skipped;
        row.reasons.insert(o.reason.substr(0, 160));
        break;
    }
  }
  std::string table = fmt::format("{:<44} {:>6} {:>6} {:>7}\n", "op", "passed", "failed", "skipped");
  std::string skips;
  for (const auto& [group, row] : rows) {
    if (row.passed + row.failed == 0) {
      skips += fmt::format("  {:<42} {:>3} skipped: {}\n", group.substr(0, 42), row.skipped,
                           fmt::join(row.reasons, " | "));
      continue;
    }
    table += fmt::format("{:<44} {:>6} {:>6} {:>7}\n", group.substr(0, 44), row.passed, row.failed, row.skipped);
    for (const auto& r : row.reasons) table += fmt::format("    skipped: {}\n", r);
  }
  std::printf("ONNX node tests (%s), %s: %d passed, %d failed, %d skipped\n%s\nGroups with every test skipped:\n%s",
              root.c_str(), target.label.c_str(), passed, failed, skipped, table.c_str(), skips.c_str());
  for (const auto& f : failures) ADD_FAILURE() << target.label << ": " << f;
  for (const std::string& op : required_ops) {
    auto it = rows.find(op);
    EXPECT_TRUE(it != rows.end() && it->second.passed > 0) << target.label << ": " << op << ": no ONNX node test passed";
  }
  return passed;
}

}  // namespace redwood::testing
