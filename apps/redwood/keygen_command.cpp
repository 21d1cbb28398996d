// redwood keygen: a CURVE key pair for the zmq sink's `curve` option (docs/pipelines.md, "sinks"):
// DIR/NAME.key, the public certificate to give to the other side, and DIR/NAME.key_secret, both
// keys, readable by its owner only. An existing key is never overwritten.

#include "apps/redwood/commands.hpp"
#include "stages/sink/curve_keys.hpp"

#include <fmt/format.h>

#include <memory>
#include <string>

namespace redwood::app {

Command make_keygen_command() {
  auto base = std::make_shared<std::string>();
  Command c;
  c.attach_fn = [base](CLI::App& app) {
    CLI::App* sub = app.add_subcommand(
        "keygen", "Write a CURVE key pair for the zmq sink: DIR/NAME.key (public) and DIR/NAME.key_secret (secret, mode 0600)");
    sub->add_option("name", *base, "DIR/NAME of the two files; existing files are never overwritten")->required();
    return sub;
  };
  c.run = [base] {
    const auto [public_file, secret_file] = write_curve_key_pair(*base);
    fmt::print("public key: {} (give it to the other side: a server's to its subscribers, a client's to the "
               "server's clients folder)\n",
               public_file.string());
    fmt::print("secret key: {} (mode 0600; keep it here)\n", secret_file.string());
    return 0;
  };
  return c;
}

}  // namespace redwood::app
