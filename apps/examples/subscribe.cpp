// Subscribe to a Redwood pipeline's results from C++ (cppzmq + nlohmann_json) and print them.
// A standalone program, built apart from Redwood to show that a consumer needs nothing of it:
//
//   cmake -S apps/examples -B build-examples -G Ninja && ninja -C build-examples
//   build-examples/subscribe tcp://127.0.0.1:5555 ocr-video/ --count 10
//
// Each message has two parts: the topic "<pipeline>/<stream>" and one JSON object per frame,
// schema "redwood.frame/1" (docs/pipelines.md).

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s ENDPOINT [TOPIC_PREFIX] [--count N]\n", argv[0]);
    return 2;
  }
  const std::string endpoint = argv[1];
  std::string topic_prefix;
  long count = 0;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--count" && i + 1 < argc) {
      count = std::strtol(argv[++i], nullptr, 10);
    } else {
      topic_prefix = arg;
    }
  }
  zmq::context_t context;
  zmq::socket_t socket(context, zmq::socket_type::sub);
  socket.set(zmq::sockopt::subscribe, topic_prefix);
  socket.connect(endpoint);
  for (long received = 0; count == 0 || received < count;) {
    zmq::message_t topic, body;
    if (!socket.recv(topic) || !socket.get(zmq::sockopt::rcvmore) || !socket.recv(body)) continue;
    const auto frame = nlohmann::json::parse(body.to_string(), nullptr, false);
    if (frame.is_discarded() || frame.value("schema", "") != "redwood.frame/1") {
      std::fprintf(stderr, "skipping a message that is not redwood.frame/1\n");
      continue;
    }
    ++received;
    std::string found;
    for (const auto& d : frame["detections"]) {
      const std::string label = d.contains("text") && !d["text"].get<std::string>().empty() ? d["text"].get<std::string>()
                                                                                             : d["kind"].get<std::string>();
      found += (found.empty() ? "" : "; ") + label + " " + std::to_string(d["score"].get<double>()).substr(0, 4);
    }
    // Per-stage times (ms after capture), present since the timestamps addition to the schema.
    std::string breakdown;
    if (frame.contains("timestamps")) {
      for (const auto& st : frame["timestamps"]["stages"]) {
        breakdown += (breakdown.empty() ? " [" : " ") + st["stage"].get<std::string>() + " " +
                     std::to_string(static_cast<long>(st["done_ms"].get<double>()));
      }
      if (!breakdown.empty()) breakdown += "]";
    }
    std::printf("%s #%lld %.0f ms%s: %s\n", topic.to_string().c_str(), frame["seq"].get<long long>(),
                frame["latency_ms"].get<double>(), breakdown.c_str(), found.empty() ? "-" : found.c_str());
    std::fflush(stdout);
  }
  return 0;
}
