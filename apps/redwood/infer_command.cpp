// redwood infer MODEL: load an ONNX model, feed it inputs, print what comes out and how long it took.
#include "apps/redwood/commands.hpp"

namespace redwood::app {
Command make_infer_command() {
  Command c;
  c.attach_fn = [](CLI::App& app) { return app.add_subcommand("infer", "Run an ONNX model once or repeatedly"); };
  c.run = [] { return 1; };
  return c;
}
}  // namespace redwood::app
