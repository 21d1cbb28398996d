#pragma once
// Logging goes through one spdlog logger named "redwood". The level comes from REDWOOD_LOG
// (trace, debug, info, warn, error, off; default info) or from set_log_level.

#include <spdlog/spdlog.h>

#include <string_view>

namespace redwood {

/// The process-wide logger (stderr, colour when a terminal).
spdlog::logger& log();
/// Sets the level by name; throws InvalidArgument for an unknown name.
void set_log_level(std::string_view level);

}  // namespace redwood
