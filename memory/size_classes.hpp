#pragma once
// SizeClassResource: segregated fit for middle-sized requests. A class cuts a power-of-two chunk,
// taken from the parent, into an odd number n of equal slots, so that a request between two
// powers of two takes a slot between them instead of the next power of two:
//
//   n = 3: chunk 4 MiB  [  1.33 MiB  |  1.33 MiB  |  1.33 MiB  ]     slots of 4/3 · 2^k
//   n = 5: chunk 8 MiB  [ 1.6 | 1.6 | 1.6 | 1.6 | 1.6 ]              slots of 8/5 · 2^k
//   n = 7: chunk 8 MiB  [1.14|1.14|1.14|1.14|1.14|1.14|1.14]         slots of 8/7 · 2^k
//
// With cuts up to 7 an octave (2^k, 2^(k+1)] has four classes, 8/7, 4/3, 8/5 and 2 times 2^k
// (jemalloc's are 1.25, 1.5, 1.75 and 2): rounding up loses at most 12.5 to 20 % of a slot
// instead of up to 50 % of a power-of-two block. Cuts up to 3 give two classes per octave (4/3
// and 2). More cuts round less but leave more idle slots per class: a class holds up to n - 1
// free slots in its last chunk. A request goes to the smallest class that fits it; where that is
// a power of two, or the request asks for more than `alignment`, it goes to the parent as it is
// (the parent's blocks are those powers of two).
//
// Each class keeps its chunks sorted by address (a bit per free slot: frees are checked) and its
// free slots on a LIFO stack, so the most recently freed slot, still warm in cache, is reused
// first and a class takes a chunk only when every slot it has is in use. release_free_chunks()
// gives chunks whose slots are all free back to the parent, as the pool does before it asks once
// more for a chunk the parent is out of memory for. Metadata lives outside the managed memory (it may be device memory)
// and grows only when a chunk is taken, so allocate and deallocate never call the heap otherwise.
// One mutex serializes calls: the tier is for buffers that are few per frame. Streams are
// ignored (a stream-ordered pool keeps buddy tiers only, see TieredResource).

#include "memory/resource.hpp"

#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

namespace redwood::memory {

struct SizeClassConfig {
  std::size_t max_chunk_bytes = 64ull << 20;  // power of two: the largest chunk a class takes
  std::size_t max_slots_per_chunk = 7;        // the cuts are the odd n, 3 <= n <= this (<= 63)
  std::size_t alignment = kDefaultAlignment;  // power of two >= 64: slots are multiples of it,
                                              // chunks are asked with it
};

/// The slot a request takes: its size, the chunk it is cut from and how many slots that has.
struct SlotClass {
  std::size_t slot_bytes = 0;  // 0: the request goes to the parent as it is
  std::size_t chunk_bytes = 0;
  std::uint32_t slots = 0;
};

/// `count` free blocks (or slots) of `block_bytes` each: fragmentation figures that depend on
/// the request sizes (redwood_memory_bench's BM_PipelineTrace).
struct FreeBlocks {
  std::size_t block_bytes = 0;
  std::size_t count = 0;
};

class SizeClassResource final : public MemoryResource {
 public:
  /// `parent` must outlive this resource. Throws InvalidArgument for a config out of range.
  SizeClassResource(std::string name, MemoryResource& parent, SizeClassConfig config = {});
  ~SizeClassResource() override;
  std::string_view kind() const override { return "size-class pool"; }

  /// The class a request of `bytes` takes (all zero where it goes to the parent as it is).
  SlotClass slot_class(std::size_t bytes, std::size_t alignment = kDefaultAlignment) const;
  /// Gives chunks whose slots are all free back to the parent; returns how many.
  std::size_t release_free_chunks();
  /// Free slots per class, smallest class first (classes with none left out).
  std::vector<FreeBlocks> free_slots() const;
  /// The free slots of the class a request of `bytes` takes (count 0 where it goes to the parent).
  FreeBlocks free_slots_for(std::size_t bytes, std::size_t alignment = kDefaultAlignment) const;
  const SizeClassConfig& config() const { return config_; }

 private:
  struct Chunk {
    std::byte* base;
    std::uint64_t free_mask;  // bit i: slot i is free
  };
  struct SizeClass {
    std::size_t slot_bytes, chunk_bytes;
    std::uint32_t slots;
    std::vector<Chunk> chunks;     // by address
    std::vector<std::byte*> free;  // LIFO; capacity for every slot of every chunk
  };

  void* do_allocate(std::size_t bytes, std::size_t alignment, Stream stream) override;
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment, Stream stream) override;
  PoolStats do_stats() const override;
  const SizeClass* class_for(std::size_t bytes, std::size_t alignment) const;
  SizeClass* class_for(std::size_t bytes, std::size_t alignment) {
    return const_cast<SizeClass*>(std::as_const(*this).class_for(bytes, alignment));
  }
  static Chunk* chunk_at_or_below(SizeClass& c, const std::byte* p);  // null: below every chunk
  void take_chunk(SizeClass& c);  // mutex_ held
  std::size_t release_free_chunks_locked();

  MemoryResource& parent_;
  SizeClassConfig config_;
  std::vector<SizeClass> classes_;       // by slot size
  std::vector<std::size_t> slot_sizes_;  // classes_[i].slot_bytes, searched on every call
  mutable std::mutex mutex_;
  std::size_t in_use_ = 0, requested_ = 0, high_water_ = 0, reserved_ = 0;
  std::uint64_t allocations_ = 0, deallocations_ = 0, upstream_allocations_ = 0, upstream_deallocations_ = 0;
};

}  // namespace redwood::memory
