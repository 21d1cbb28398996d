#include "memory/size_classes.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>

namespace redwood::memory {

namespace {
std::uint64_t all_slots(std::uint32_t slots) { return (std::uint64_t{1} << slots) - 1; }

/// Capacity for `n` elements, growing geometrically.
template <typename T>
void reserve_at_least(std::vector<T>& v, std::size_t n) {
  if (n > v.capacity()) v.reserve(std::max(n, 2 * v.capacity()));
}
}  // namespace

SizeClassResource::Chunk* SizeClassResource::chunk_at_or_below(SizeClass& c, const std::byte* p) {
  const auto it = std::upper_bound(c.chunks.begin(), c.chunks.end(), p,
                                   [](const std::byte* q, const Chunk& ch) { return q < ch.base; });
  return it == c.chunks.begin() ? nullptr : &*(it - 1);
}

SizeClassResource::SizeClassResource(std::string name, MemoryResource& parent, SizeClassConfig config)
    : MemoryResource(std::move(name)), parent_(parent), config_(config) {
  const auto& c = config_;
  RW_EXPECTS(std::has_single_bit(c.max_chunk_bytes), InvalidArgument, "{} '{}': max_chunk_bytes {} is not a power of two",
             kind(), this->name(), c.max_chunk_bytes);
  RW_EXPECTS(c.max_slots_per_chunk >= 3 && c.max_slots_per_chunk <= 63, InvalidArgument,
             "{} '{}': max_slots_per_chunk {} is outside 3..63", kind(), this->name(), c.max_slots_per_chunk);
  RW_EXPECTS(std::has_single_bit(c.alignment) && c.alignment >= 64, InvalidArgument,
             "{} '{}': alignment {} is not a power of two >= 64", kind(), this->name(), c.alignment);
  // Every odd cut of every chunk size, slots rounded down to the alignment; a cut whose rounding
  // would leave more than 1/64 of its chunk unused (small chunks) is left out.
  for (std::size_t chunk = c.alignment; chunk != 0 && chunk <= c.max_chunk_bytes; chunk *= 2) {
    for (std::uint32_t n = 3; n <= c.max_slots_per_chunk; n += 2) {
      const std::size_t slot = chunk / n / c.alignment * c.alignment;
      if (slot == 0 || chunk - n * slot > chunk / 64) continue;
      classes_.push_back(SizeClass{slot, chunk, n, {}, {}});
    }
  }
  std::sort(classes_.begin(), classes_.end(), [](const SizeClass& a, const SizeClass& b) {
    return a.slot_bytes != b.slot_bytes ? a.slot_bytes < b.slot_bytes : a.chunk_bytes < b.chunk_bytes;
  });
  classes_.erase(std::unique(classes_.begin(), classes_.end(),
                             [](const SizeClass& a, const SizeClass& b) { return a.slot_bytes == b.slot_bytes; }),
                 classes_.end());
  for (const SizeClass& k : classes_) slot_sizes_.push_back(k.slot_bytes);
}

SizeClassResource::~SizeClassResource() {
  for (SizeClass& c : classes_) {
    for (const Chunk& ch : c.chunks) parent_.deallocate(ch.base, c.chunk_bytes, config_.alignment, nullptr);
  }
}

SlotClass SizeClassResource::slot_class(std::size_t bytes, std::size_t alignment) const {
  const SizeClass* c = class_for(bytes, alignment);
  return c != nullptr ? SlotClass{c->slot_bytes, c->chunk_bytes, c->slots} : SlotClass{};
}

const SizeClassResource::SizeClass* SizeClassResource::class_for(std::size_t bytes, std::size_t alignment) const {
  if (alignment > config_.alignment || slot_sizes_.empty() || bytes > slot_sizes_.back()) return nullptr;
  const auto it = std::lower_bound(slot_sizes_.begin(), slot_sizes_.end(), bytes);
  // A power of two that fits as tightly is the parent's own block.
  return *it < std::bit_ceil(bytes) ? &classes_[static_cast<std::size_t>(it - slot_sizes_.begin())] : nullptr;
}

void SizeClassResource::take_chunk(SizeClass& c) {
  // Room for the chunk's metadata first, so that nothing throws once the parent has given it.
  reserve_at_least(c.chunks, c.chunks.size() + 1);
  reserve_at_least(c.free, (c.chunks.size() + 1) * c.slots);  // every slot may be free at once
  void* raw = nullptr;
  try {
    raw = parent_.allocate(c.chunk_bytes, config_.alignment);
  } catch (const OutOfMemory&) {
    if (release_free_chunks_locked() == 0) throw;
    raw = parent_.allocate(c.chunk_bytes, config_.alignment);
  }
  auto* base = static_cast<std::byte*>(raw);
  const auto at = std::upper_bound(c.chunks.begin(), c.chunks.end(), base,
                                   [](const std::byte* p, const Chunk& ch) { return p < ch.base; });
  c.chunks.insert(at, Chunk{base, all_slots(c.slots)});
  for (std::uint32_t i = c.slots; i-- > 0;) c.free.push_back(base + i * c.slot_bytes);  // slot 0 on top
  reserved_ += c.chunk_bytes;
  ++upstream_allocations_;
}

void* SizeClassResource::do_allocate(std::size_t bytes, std::size_t alignment, Stream stream) {
  SizeClass* c = class_for(bytes, alignment);
  if (c == nullptr) {
    void* p = parent_.allocate(bytes, alignment, stream);
    std::lock_guard lock(mutex_);
    in_use_ += bytes, requested_ += bytes, reserved_ += bytes;
    high_water_ = std::max(high_water_, in_use_);
    ++allocations_, ++upstream_allocations_;
    return p;
  }
  std::lock_guard lock(mutex_);
  if (c->free.empty()) take_chunk(*c);
  std::byte* p = c->free.back();
  c->free.pop_back();
  Chunk* ch = chunk_at_or_below(*c, p);
  ch->free_mask &= ~(std::uint64_t{1} << ((p - ch->base) / c->slot_bytes));
  in_use_ += c->slot_bytes, requested_ += bytes;
  high_water_ = std::max(high_water_, in_use_);
  ++allocations_;
  return p;
}

void SizeClassResource::do_deallocate(void* p, std::size_t bytes, std::size_t alignment, Stream stream) {
  SizeClass* c = class_for(bytes, alignment);
  if (c == nullptr) {
    parent_.deallocate(p, bytes, alignment, stream);
    std::lock_guard lock(mutex_);
    in_use_ -= bytes, requested_ -= bytes, reserved_ -= bytes;
    ++deallocations_, ++upstream_deallocations_;
    return;
  }
  auto* slot = static_cast<std::byte*>(p);
  std::lock_guard lock(mutex_);
  Chunk* ch = chunk_at_or_below(*c, slot);
  const bool in_chunk =
      ch != nullptr && slot < ch->base + c->slots * c->slot_bytes && (slot - ch->base) % c->slot_bytes == 0;
  RW_EXPECTS(in_chunk, InvalidArgument,
             "{} '{}': deallocate({}, {}) is not a slot of its class ({}): a wrong size, or memory from elsewhere",
             kind(), name(), p, bytes, format_bytes(c->slot_bytes));
  const std::uint64_t bit = std::uint64_t{1} << ((slot - ch->base) / c->slot_bytes);
  RW_EXPECTS((ch->free_mask & bit) == 0, InvalidArgument, "{} '{}': deallocate({}, {}) of a slot that is already free",
             kind(), name(), p, bytes);
  ch->free_mask |= bit;
  c->free.push_back(slot);
  in_use_ -= c->slot_bytes, requested_ -= bytes;
  ++deallocations_;
}

std::size_t SizeClassResource::release_free_chunks() {
  std::lock_guard lock(mutex_);
  return release_free_chunks_locked();
}

std::size_t SizeClassResource::release_free_chunks_locked() {
  std::size_t released = 0;
  for (SizeClass& c : classes_) {
    const std::uint64_t all = all_slots(c.slots);
    const auto wholly_free = [&](const Chunk& ch) { return ch.free_mask == all; };
    if (std::none_of(c.chunks.begin(), c.chunks.end(), wholly_free)) continue;
    std::erase_if(c.free, [&](const std::byte* p) { return wholly_free(*chunk_at_or_below(c, p)); });
    for (const Chunk& ch : c.chunks) {
      if (!wholly_free(ch)) continue;
      parent_.deallocate(ch.base, c.chunk_bytes, config_.alignment, nullptr);
      reserved_ -= c.chunk_bytes;
      ++upstream_deallocations_, ++released;
    }
    std::erase_if(c.chunks, wholly_free);
  }
  return released;
}

std::vector<FreeBlocks> SizeClassResource::free_slots() const {
  std::lock_guard lock(mutex_);
  std::vector<FreeBlocks> out;
  for (const SizeClass& c : classes_) {
    if (!c.free.empty()) out.push_back({c.slot_bytes, c.free.size()});
  }
  return out;
}

FreeBlocks SizeClassResource::free_slots_for(std::size_t bytes, std::size_t alignment) const {
  const SizeClass* c = class_for(bytes, alignment);
  if (c == nullptr) return {};
  std::lock_guard lock(mutex_);
  return {c->slot_bytes, c->free.size()};
}

PoolStats SizeClassResource::do_stats() const {
  std::lock_guard lock(mutex_);
  PoolStats st{.name = name(), .bytes_in_use = in_use_, .requested_bytes = requested_, .high_water_bytes = high_water_,
               .reserved_bytes = reserved_, .allocations = allocations_, .deallocations = deallocations_,
               .upstream_allocations = upstream_allocations_, .upstream_deallocations = upstream_deallocations_};
  for (const SizeClass& c : classes_) {
    st.free_bytes += c.free.size() * c.slot_bytes;
    if (!c.free.empty()) st.largest_free_block = c.slot_bytes;
  }
  return st;
}

}  // namespace redwood::memory
