// redwood: the launcher. Subcommands live in their own files (infer_command.cpp, ...); this file
// only wires them into CLI11 and turns every Redwood error into one message and a non-zero exit.

#include "apps/redwood/commands.hpp"
#include "core/error.hpp"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <malloc.h>

int main(int argc, char** argv) {
  // Keep freed tensor memory in the heap instead of returning it to the kernel: glibc otherwise
  // serves every block over 128 KiB-32 MiB with a fresh mmap, and a model run that allocates its
  // intermediates anew pays a page fault per 4 KiB on each run (on the 2-core VM, without this, 60
  // of BlazeFace's 87 ms and most of det's elementwise time). 32 MiB is glibc's largest mmap threshold.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
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
