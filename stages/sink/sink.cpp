#include "stages/sink/sink.hpp"

namespace redwood {

std::map<std::string, SinkFactory>& sink_registry() {
  static std::map<std::string, SinkFactory> registry;
  return registry;
}

bool register_sink(const std::string& type, SinkFactory factory) {
  sink_registry()[type] = std::move(factory);
  return true;
}

}  // namespace redwood
