#include "stages/sink/sink.hpp"

namespace redwood {

Registry<SinkFactory>& sink_registry() {
  static Registry<SinkFactory> registry("sink type");
  return registry;
}

bool register_sink(const std::string& type, SinkFactory factory) {
  return sink_registry().add(type, std::move(factory));
}

}  // namespace redwood
