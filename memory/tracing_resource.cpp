#include "memory/tracing_resource.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

namespace redwood::memory {
namespace {
constexpr char kMagic[8] = {'R', 'W', 'M', 'T', 'R', 'A', 'C', 'E'};
constexpr std::uint32_t kVersion = 1;
constexpr std::size_t kBufferBytes = 64 << 10;
}  // namespace

TracingResource::TracingResource(MemoryResource& upstream, const std::filesystem::path& path)
    : MemoryResource("trace of " + upstream.name()), upstream_(upstream), path_(path) {
  file_ = std::fopen(path.c_str(), "wb");
  RW_EXPECTS(file_ != nullptr, Error, "{}: cannot write the allocation trace: {}", path.string(),
             std::strerror(errno));
  buffer_.insert(buffer_.end(), std::begin(kMagic), std::end(kMagic));
  for (int i = 0; i < 4; ++i) buffer_.push_back(static_cast<unsigned char>(kVersion >> (8 * i)));
}

TracingResource::~TracingResource() {
  flush();
  std::fclose(file_);
}

void TracingResource::put_varint(std::uint64_t v) {
  while (v >= 0x80) {
    buffer_.push_back(static_cast<unsigned char>(v | 0x80));
    v >>= 7;
  }
  buffer_.push_back(static_cast<unsigned char>(v));
  ++events_;
  if (buffer_.size() >= kBufferBytes) {
    std::fwrite(buffer_.data(), 1, buffer_.size(), file_);
    buffer_.clear();
  }
}

void TracingResource::flush() {
  std::lock_guard lock(mutex_);
  if (!buffer_.empty()) std::fwrite(buffer_.data(), 1, buffer_.size(), file_);
  buffer_.clear();
  std::fflush(file_);
}

std::uint64_t TracingResource::recorded_events() const {
  std::lock_guard lock(mutex_);
  return events_;
}

void* TracingResource::do_allocate(std::size_t bytes, std::size_t alignment, Stream stream) {
  void* p = upstream_.allocate(bytes, alignment, stream);
  std::lock_guard lock(mutex_);
  index_of_[p] = allocations_++;
  put_varint(static_cast<std::uint64_t>(bytes) << 1);
  return p;
}

void TracingResource::do_deallocate(void* p, std::size_t bytes, std::size_t alignment, Stream stream) {
  {
    std::lock_guard lock(mutex_);
    auto it = index_of_.find(p);
    RW_EXPECTS(it != index_of_.end(), InvalidArgument,
               "{} '{}': deallocate of {} which it did not allocate", kind(), name(), p);
    put_varint((allocations_ - 1 - it->second) << 1 | 1);
    index_of_.erase(it);
  }
  upstream_.deallocate(p, bytes, alignment, stream);
}

AllocationTrace read_allocation_trace(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  RW_EXPECTS(in.good(), Error, "{}: cannot read the allocation trace: {}", path.string(), std::strerror(errno));
  const std::vector<unsigned char> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  RW_EXPECTS(data.size() >= 12 && std::memcmp(data.data(), kMagic, 8) == 0, Error,
             "{}: not an allocation trace (no RWMTRACE header)", path.string());
  std::uint32_t version = 0;
  for (int i = 0; i < 4; ++i) version |= static_cast<std::uint32_t>(data[8 + i]) << (8 * i);
  RW_EXPECTS(version == kVersion, Error, "{}: allocation trace version {}, this build reads {}",
             path.string(), version, kVersion);
  AllocationTrace trace;
  std::vector<std::uint64_t> bytes_of;  // allocation index -> bytes (0 once freed)
  std::uint64_t live = 0;
  std::size_t pos = 12;
  while (pos < data.size()) {
    const std::size_t start = pos;
    std::uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      RW_EXPECTS(pos < data.size() && shift < 64, Error, "{}: truncated record at byte {}",
                 path.string(), start);
      const unsigned char b = data[pos++];
      v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) break;
    }
    if (!(v & 1)) {
      trace.events.push_back({true, v >> 1});
      bytes_of.push_back(v >> 1);
      live += v >> 1;
      if (live > trace.peak_live_bytes) {
        trace.peak_live_bytes = live;
        trace.peak_event = trace.events.size() - 1;
      }
      continue;
    }
    const std::uint64_t back = v >> 1;
    RW_EXPECTS(back < bytes_of.size() && bytes_of[bytes_of.size() - 1 - back] != 0, Error,
               "{}: record at byte {} frees an allocation that is not live", path.string(), start);
    const std::uint64_t index = bytes_of.size() - 1 - back;
    live -= bytes_of[index];
    bytes_of[index] = 0;
    trace.events.push_back({false, index});
  }
  trace.allocations = bytes_of.size();
  return trace;
}

}  // namespace redwood::memory
