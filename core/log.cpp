#include "core/log.hpp"

#include "core/error.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>

namespace redwood {

spdlog::logger& log() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    auto l = spdlog::stderr_color_mt("redwood");
    l->set_pattern("[%H:%M:%S.%e] [%^%l%$] %v");
    if (const char* env = std::getenv("REDWOOD_LOG")) {
      l->set_level(spdlog::level::from_str(env));
    } else {
      l->set_level(spdlog::level::info);
    }
    return l;
  }();
  return *logger;
}

void set_log_level(std::string_view level) {
  const auto parsed = spdlog::level::from_str(std::string(level));
  RW_EXPECTS(parsed != spdlog::level::off || level == "off", InvalidArgument,
             "unknown log level '{}' (trace, debug, info, warn, error, off)", level);
  log().set_level(parsed);
}

}  // namespace redwood
