// redwood: the launcher. Subcommands live in their own files (infer_command.cpp, ...); this file
// only wires them into CLI11 and turns every Redwood error into one message and a non-zero exit.

#include "apps/redwood/commands.hpp"
#include "core/error.hpp"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>

int main(int argc, char** argv) {
  CLI::App app{"Redwood: video-analytics runtime over CPU and GPU"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "redwood 0.1.0");
  std::vector<redwood::app::Command> commands = redwood::app::all_commands();
  for (auto& c : commands) c.attach(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    for (auto& c : commands) {
      if (c.selected()) return c.run();
    }
  } catch (const redwood::Error& e) {
    std::fprintf(stderr, "redwood: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "redwood: internal error: %s\n", e.what());
    return 2;
  }
  return 0;
}
