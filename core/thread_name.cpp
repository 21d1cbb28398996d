#include "core/thread_name.hpp"

#include <pthread.h>

#include <algorithm>
#include <string>

namespace redwood {

void set_thread_name(std::string_view name) {
  const std::string cut(name.substr(0, std::min<std::size_t>(name.size(), 15)));
  pthread_setname_np(pthread_self(), cut.c_str());  // best effort: a name is only for people
}

}  // namespace redwood
