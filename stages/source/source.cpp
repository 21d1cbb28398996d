#include "stages/source/source.hpp"

namespace redwood {

std::map<std::string, SourceFactory>& source_registry() {
  static std::map<std::string, SourceFactory> registry;
  return registry;
}

bool register_source(const std::string& type, SourceFactory factory) {
  source_registry()[type] = std::move(factory);
  return true;
}

}  // namespace redwood
