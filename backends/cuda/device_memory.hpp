#pragma once
// The CUDA backend's memory, by lifetime (docs/memory.md):
//
//   plan-lifetime   ArenaResource per plan and per runner's weights ─┐
//   (static level)  (one cudaMalloc each, bump-allocated, freed whole) ├─► device_upstream(d): cudaMalloc
//   transient       device_pool(d): buddy pool, stream-ordered reuse ─┘
//   host staging    pinned_pool(): buddy pool ─► pinned_upstream(): cudaHostAlloc ◄─ the frames' pool
//                                                                                   (stages/frame_memory)
//
// Every resource here is process-wide, made on first use and kept until exit (CUDA may already
// be unloading when static destructors run, so they are never destroyed).

#include "memory/arena.hpp"
#include "memory/buddy.hpp"
#include "memory/cuda/cuda_resources.hpp"

#include <cstddef>

namespace redwood::cuda {

/// cudaMalloc on GPU `device`: the upstream of the arenas and of device_pool().
memory::cuda::DeviceResource& device_upstream(int device);
/// Transient device buffers on GPU `device` (DeviceBuffer's default): a buddy pool whose freed
/// blocks are reused on another stream only once the freeing stream's work has completed;
/// requests above its block size go to device_upstream() directly.
memory::MemoryResource& device_pool(int device);
/// Page-locked host memory (cudaHostAlloc), in large chunks: the frames' pool's upstream while a
/// model runs on a GPU, and pinned_pool()'s.
memory::cuda::PinnedHostResource& pinned_upstream();
/// Page-locked staging buffers (the slots' copies of tensors that are not in pinned memory).
memory::MemoryResource& pinned_pool();

/// An arena on GPU `device` for `bytes` of plan-lifetime buffers (workspaces, weights): one
/// cudaMalloc when first used, freed with the arena.
std::unique_ptr<memory::ArenaResource> device_arena(std::string name, int device, std::size_t bytes);

}  // namespace redwood::cuda
