#pragma once
// Names the calling thread as `top`, `ps -L` and /proc/PID/task/TID/comm show it (Linux keeps
// 15 characters). Threads a library starts from a named thread inherit its name: FFmpeg's decoder
// threads show as their stream reader's, so a per-thread CPU profile tells decoding apart from
// the stages (oneTBB's workers) and the runners' completion threads.

#include <string_view>

namespace redwood {

void set_thread_name(std::string_view name);

}  // namespace redwood
