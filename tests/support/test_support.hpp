#pragma once
// Helpers shared by Redwood's tests: random tensors, one-node graphs run through the executor,
// and tensor comparison with numpy-style tolerances.

#include "core/graph/graph.hpp"
#include "core/model_runner.hpp"
#include "core/tensor.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace redwood::testing {

using Ints = std::vector<std::int64_t>;

/// An fp32 tensor of `shape` holding `values` (row-major).
Tensor f32(Shape shape, std::vector<float> values);
/// A 1-D int64 tensor holding `values` (shapes, axes, indices as ONNX ops take them).
Tensor i64(std::vector<std::int64_t> values);
/// An int64 tensor of `shape` holding `values`.
Tensor i64(Shape shape, std::vector<std::int64_t> values);
/// An fp32 tensor of `shape` holding start, start + 1, ... in row-major order.
Tensor iota_f32(Shape shape, float start = 0);

/// Uniform random values in [lo, hi) (integers: rounded), deterministic for a seed.
Tensor random_tensor(DType dtype, Shape shape, double lo = -1.0, double hi = 1.0,
                     std::uint32_t seed = 1);

struct NodeSpec {
  std::string op_type;
  std::vector<Tensor> inputs;           // an undefined Tensor is an absent optional input
  std::map<std::string, AttributeValue> attributes;
  std::size_t num_outputs = 1;
  std::int64_t opset = 17;
  std::vector<bool> constant;           // inputs given as initializers (default: none)
};

/// A NodeSpec with the fields most tests set (opset 17, no constant inputs).
NodeSpec make_spec(std::string op_type, std::vector<Tensor> inputs,
                   std::map<std::string, AttributeValue> attributes = {}, std::size_t num_outputs = 1);

/// An IR node without attributes, for tests that build a Graph by hand.
Node make_node(std::string name, std::string op_type, std::vector<std::string> inputs,
               std::vector<std::string> outputs);

/// An empty graph (opset 17) with one fp32 input "x" and one fp32 output "y" of unknown shape,
/// for tests that add the nodes and initializers between them.
std::shared_ptr<Graph> make_x_to_y_graph(std::string name);

/// An fp32 [N, c, h, w] value whose batch is the symbol "N" (known channels and extent), as the
/// ONNX importer leaves an image input, for graphs built by hand.
ValueInfo batched_nchw(std::string name, std::int64_t c, std::int64_t h, std::int64_t w);

/// Sets (or, with nullptr, unsets) an environment variable for its scope and restores what was
/// there on destruction, also when an assertion leaves the test early: for tests of what the
/// environment configures (REDWOOD_CACHE_DIR, REDWOOD_LOG).
class ScopedEnv {
 public:
  ScopedEnv(std::string name, const char* value);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  /// Sets the variable to `value` (nullptr: unsets it), still restored on destruction.
  void set(const char* value) const;

 private:
  std::string name_;
  bool had_ = false;
  std::string before_;
};

/// What the redwood logger (core/log.hpp) writes while this lives, at the logger's level, for
/// tests of warnings.
class LogCapture {
 public:
  LogCapture();
  ~LogCapture();
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;
  std::string text() const;

 private:
  struct Sink;
  std::unique_ptr<Sink> sink_;
};

/// The message of the E that f throws ("" and a test failure when it throws nothing, or another
/// exception).
template <class E, class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "another exception: " << e.what();
    return {};
  }
  ADD_FAILURE() << "nothing thrown";
  return {};
}

/// ‖actual − expected‖₂ / ‖expected‖₂ over float tensors of one shape, compared as fp32 (infinity
/// for a shape mismatch or a NaN anywhere; the plain norm of `actual` when `expected` is all 0).
double relative_l2(const Tensor& actual, const Tensor& expected);

/// Builds a graph of one node and runs it on the CPU through the Executor.
std::vector<Tensor> run_node(const NodeSpec& spec);

/// Expects equal shapes and |a - e| <= atol + rtol * |e| element-wise; reports the worst element.
void expect_close(const Tensor& actual, const Tensor& expected, double rtol = 1e-5,
                  double atol = 1e-6);

/// What the launcher printed (stdout and stderr together) and how it exited.
struct LauncherResult {
  int exit_code = -1;  // -1 when it did not exit normally
  std::string output;
};

/// Runs `command` through the shell, stderr joined to stdout.
LauncherResult run_command(const std::string& command);
/// Runs the built `redwood` binary (REDWOOD_BINARY) with `args` through the shell.
LauncherResult run_launcher(const std::string& args);

/// The folder scripts/setup.sh fetched assets into (REDWOOD_ASSETS_DIR at build time, or the
/// REDWOOD_ASSETS environment variable).
std::filesystem::path assets_dir();

/// Submits `batch` to `runner` and waits for its result (errors stay in InferResult::error).
InferResult run_batch(ModelRunner& runner, InferBatch batch);
/// The first output of one batch of `x` (the model's first input); rethrows the batch's error.
Tensor run_one(ModelRunner& runner, const Tensor& x);

}  // namespace redwood::testing

/// Expects `expr` to throw an E whose message holds every one of the strings that follow.
#define EXPECT_THROWS_SAYING(expr, E, ...)                                                            \
  do {                                                                                              \
    const std::string said = ::redwood::testing::message_of<E>([&] { (void)(expr); });              \
    for (const char* part : {__VA_ARGS__}) {                                                        \
      EXPECT_NE(said.find(part), std::string::npos) << "'" << part << "' not in: " << said;         \
    }                                                                                               \
  } while (false)
