// redwood: the launcher. Subcommands live in their own files (infer_command.cpp, ...); this file
// only wires them into CLI11 and turns every Redwood error into one message and a non-zero exit.

#include "apps/redwood/commands.hpp"
#include "core/error.hpp"
#include "redwood/config.hpp"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <malloc.h>
#include <unistd.h>

namespace {

// oneDNN (Debian builds it with OpenMP) runs CPU inference on an OpenMP team whose threads, by
// default, spin at their barriers for a while before they sleep. Beside oneTBB's workers (the
// pipeline's other stages), or any other busy thread, spinning threads take the cores the work
// needs, and inference degrades several-fold (docs/pipelines.md, "Threads"). OpenMP reads its
// wait policy once, when its library loads, before main: so the launcher sets
// OMP_WAIT_POLICY=PASSIVE and starts itself again, once, unless the variable is set already (an
// explicit choice, ACTIVE included, is kept).
void use_passive_openmp_threads(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  if (setenv("OMP_WAIT_POLICY", "PASSIVE", 1) != 0) return;
  execv("/proc/self/exe", argv);
  // No /proc (or exec refused): go on as started; OpenMP then keeps its default policy.
  unsetenv("OMP_WAIT_POLICY");
}

}  // namespace

int main(int argc, char** argv) {
  use_passive_openmp_threads(argv);
  // Keep freed tensor memory in the heap instead of returning it to the kernel: glibc otherwise
  // serves every block over 128 KiB-32 MiB with a fresh mmap, and a model run that allocates its
  // intermediates anew pays a page fault per 4 KiB on each run (on the 2-core VM, without this, 60
  // of BlazeFace's 87 ms and most of det's elementwise time). 32 MiB is glibc's largest mmap threshold.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  CLI::App app{"Redwood: video-analytics runtime over CPU and GPU"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "redwood " REDWOOD_VERSION);
  std::vector<redwood::app::Command> commands = redwood::app::all_commands();
  for (auto& c : commands) c.attach(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 prints the message (or the help) and names a code per kind of mistake (104, 106...);
    // every command-line error exits 1, as every other bad input does.
    return app.exit(e) == 0 ? 0 : 1;
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
