#include "stages/source/source.hpp"

namespace redwood {

Registry<SourceFactory>& source_registry() {
  static Registry<SourceFactory> registry("source type");
  return registry;
}

bool register_source(const std::string& type, SourceFactory factory) {
  return source_registry().add(type, std::move(factory));
}

}  // namespace redwood
