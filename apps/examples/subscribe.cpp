// Subscribe to a Redwood pipeline's results from C++ (cppzmq + nlohmann_json) and print them.
// A standalone program, built apart from Redwood to show that a consumer needs nothing of it:
//
//   cmake -S apps/examples -B build-examples -G Ninja && ninja -C build-examples
//   build-examples/subscribe tcp://127.0.0.1:5555 ocr-video/ --count 10
//
// Each message has two parts: the topic "<pipeline>/<stream>" and one JSON object per frame,
// schema "redwood.frame/1" (docs/pipelines.md). Bad arguments and unreachable endpoints end with
// a message and exit code 2; a message that is not redwood.frame/1 is skipped with a warning.
//
// A sink with `curve` takes only CURVE clients whose public key it lists: give the server's
// public certificate and this client's secret one (both as `redwood keygen` writes them):
//
//   build-examples/subscribe tcp://server:5555 --server-key keys/server.key --client-key keys/me.key_secret

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace {

constexpr const char* kUsage =
    "usage: %s ENDPOINT [TOPIC_PREFIX] [--count N] [--timeout SECONDS]\n"
    "       [--server-key FILE --client-key FILE]\n"
    "\n"
    "Prints the results a Redwood pipeline publishes on ENDPOINT (e.g. tcp://127.0.0.1:5555),\n"
    "one line per frame: topic, sequence number, latency, per-stage times and what was found.\n"
    "\n"
    "  TOPIC_PREFIX       only topics starting with it, e.g. ocr-video/ (default: all)\n"
    "  --count N          stop after N messages (default 0: never)\n"
    "  --timeout SECONDS  stop after this many idle seconds (default 0: never)\n"
    "  --server-key FILE  CURVE: the sink's public certificate (NAME.key)\n"
    "  --client-key FILE  CURVE: this client's secret certificate (NAME.key_secret, holding\n"
    "                     both its keys); the sink must list its NAME.key in `clients`\n"
    "  -h, --help         this text\n";

struct Options {
  std::string endpoint, topic_prefix, server_key_file, client_key_file;
  long count = 0;
  double timeout_s = 0;
};

[[noreturn]] void usage_error(const char* program, const std::string& message) {
  std::fprintf(stderr, "subscribe: %s\n", message.c_str());
  std::fprintf(stderr, kUsage, program);
  std::exit(2);
}

// A whole non-negative number or fail naming the option.
double parse_number(const char* program, const std::string& option, const char* text, bool integral) {
  errno = 0;
  char* end = nullptr;
  const double value = integral ? static_cast<double>(std::strtol(text, &end, 10)) : std::strtod(text, &end);
  if (errno != 0 || end == text || *end != '\0' || value < 0) {
    usage_error(program, option + " wants a non-negative " + (integral ? "integer" : "number") + ", not '" + text + "'");
  }
  return value;
}

Options parse(int argc, char** argv) {
  Options o;
  int positional = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      std::printf(kUsage, argv[0]);
      std::exit(0);
    } else if (arg == "--count" || arg == "--timeout") {
      if (i + 1 >= argc) usage_error(argv[0], arg + " needs a value");
      const double v = parse_number(argv[0], arg, argv[++i], arg == "--count");
      if (arg == "--count") o.count = static_cast<long>(v);
      else o.timeout_s = v;
    } else if (arg == "--server-key" || arg == "--client-key") {
      if (i + 1 >= argc) usage_error(argv[0], arg + " needs a value");
      (arg == "--server-key" ? o.server_key_file : o.client_key_file) = argv[++i];
    } else if (arg.size() > 1 && arg[0] == '-') {
      usage_error(argv[0], "unknown option '" + arg + "'");
    } else if (positional == 0) {
      o.endpoint = arg;
      ++positional;
    } else if (positional == 1) {
      o.topic_prefix = arg;
      ++positional;
    } else {
      usage_error(argv[0], "unexpected argument '" + arg + "'");
    }
  }
  if (o.endpoint.empty()) usage_error(argv[0], "give the ENDPOINT to subscribe to");
  if (o.server_key_file.empty() != o.client_key_file.empty()) {
    usage_error(argv[0], "CURVE needs both --server-key and --client-key");
  }
  return o;
}

// One key of a ZeroMQ certificate file (`name = "<40 Z85 characters>"`, as redwood keygen, czmq
// and pyzmq write them), checked: a bad file ends the program naming it, exit code 2.
std::string read_key(const std::string& file, const char* name) {
  std::ifstream in(file);
  if (!in) {
    std::fprintf(stderr, "subscribe: %s: cannot read: %s\n", file.c_str(), std::strerror(errno));
    std::exit(2);
  }
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    const auto start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line.compare(start, std::strlen(name), name) != 0) continue;
    const auto equals = line.find('=', start);
    if (equals == std::string::npos) continue;
    std::string key = line.substr(equals + 1);
    key.erase(0, key.find_first_not_of(" \t\"'"));
    key.erase(key.find_last_not_of(" \t\r\"'") + 1);
    unsigned char bytes[32];
    if (key.size() != 40 || zmq_z85_decode(bytes, key.c_str()) == nullptr) {
      std::fprintf(stderr, "subscribe: %s:%d: %s is not a CURVE key (40 Z85 characters)\n", file.c_str(), number, name);
      std::exit(2);
    }
    return key;
  }
  std::fprintf(stderr, "subscribe: %s: no %s line; expected a ZeroMQ CURVE certificate (redwood keygen writes them)\n",
               file.c_str(), name);
  std::exit(2);
}

// One line per frame; fields a producer may leave out print as "-".
std::string describe(const nlohmann::json& frame) {
  std::string found;
  for (const auto& d : frame.value("detections", nlohmann::json::array())) {
    std::string label = d.value("text", std::string());
    if (label.empty()) label = d.value("kind", std::string("?"));
    found += (found.empty() ? "" : "; ") + label + " " + std::to_string(d.value("score", 0.0)).substr(0, 4);
  }
  std::string breakdown;
  if (frame.contains("timestamps") && frame["timestamps"].contains("stages")) {
    for (const auto& st : frame["timestamps"]["stages"]) {
      breakdown += (breakdown.empty() ? " [" : " ") + st.value("stage", std::string("?")) + " " +
                   std::to_string(static_cast<long>(st.value("done_ms", 0.0)));
    }
    if (!breakdown.empty()) breakdown += "]";
  }
  char head[64];
  std::snprintf(head, sizeof head, "#%lld %.0f ms", frame.value("seq", -1LL), frame.value("latency_ms", 0.0));
  return std::string(head) + breakdown + ": " + (found.empty() ? "-" : found);
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  try {
    zmq::context_t context;
    zmq::socket_t socket(context, zmq::socket_type::sub);
    if (!o.server_key_file.empty()) {
      socket.set(zmq::sockopt::curve_serverkey, read_key(o.server_key_file, "public-key"));
      socket.set(zmq::sockopt::curve_publickey, read_key(o.client_key_file, "public-key"));
      socket.set(zmq::sockopt::curve_secretkey, read_key(o.client_key_file, "secret-key"));
    }
    socket.set(zmq::sockopt::subscribe, o.topic_prefix);
    if (o.timeout_s > 0) socket.set(zmq::sockopt::rcvtimeo, static_cast<int>(o.timeout_s * 1000));
    socket.connect(o.endpoint);
    for (long received = 0; o.count == 0 || received < o.count;) {
      zmq::message_t topic, body;
      if (!socket.recv(topic)) break;  // idle for --timeout
      if (!socket.get(zmq::sockopt::rcvmore) || !socket.recv(body)) continue;
      const auto frame = nlohmann::json::parse(body.to_string(), nullptr, false);
      if (frame.is_discarded() || !frame.is_object() || frame.value("schema", "") != "redwood.frame/1") {
        std::fprintf(stderr, "subscribe: skipping a message on '%s' that is not redwood.frame/1\n", topic.to_string().c_str());
        continue;
      }
      std::string line;
      try {
        line = describe(frame);
      } catch (const nlohmann::json::exception& e) {  // a field of the wrong type
        std::fprintf(stderr, "subscribe: skipping a malformed redwood.frame/1 message: %s\n", e.what());
        continue;
      }
      ++received;
      std::printf("%s %s\n", topic.to_string().c_str(), line.c_str());
      std::fflush(stdout);
    }
  } catch (const zmq::error_t& e) {
    std::fprintf(stderr, "subscribe: %s: %s\n", o.endpoint.c_str(), e.what());
    return 2;
  }
  return 0;
}
