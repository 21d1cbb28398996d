#pragma once
// A launcher subcommand: attach() declares its options on the CLI11 app; run() does the work
// after parsing and returns the exit code. Errors are thrown as redwood::Error.

#include <CLI/CLI.hpp>

#include <functional>
#include <memory>
#include <vector>

namespace redwood::app {

struct Command {
  std::function<CLI::App*(CLI::App&)> attach_fn;
  std::function<int()> run;
  CLI::App* sub = nullptr;

  void attach(CLI::App& app) { sub = attach_fn(app); }
  bool selected() const { return sub != nullptr && sub->parsed(); }
};

Command make_infer_command();
Command make_probe_command();
Command make_run_command();
Command make_plan_command();
Command make_bench_command();
Command make_keygen_command();
Command make_deploy_command();

inline std::vector<Command> all_commands() { return {make_infer_command(), make_probe_command(), make_run_command(),
                                                        make_plan_command(), make_bench_command(), make_keygen_command(),
                                                        make_deploy_command()}; }

}  // namespace redwood::app
