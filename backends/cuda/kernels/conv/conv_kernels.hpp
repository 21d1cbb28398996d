#pragma once
// Launchers of the convolution kernels (conv_kernels.cu, conv_mma.cuh). x is NCHW, w is
// [K, C/groups, R, S], y is [N, K, OH, OW]; all fp32 in memory. The epilogue (bias, residual,
// activation) is fused.

#include "backends/cuda/kernels/kernel_params.hpp"

#include <cstddef>
#include <vector>

namespace redwood::cuda::kernels {

/// One way to run an implicit-GEMM convolution: a tile of the GEMM per block (an index into
/// conv_tiles(type)), the number of K ranges (split-K) computed by separate blocks, and, with
/// several, whether the tensor-core kernel adds them itself (SplitKCounters, below) rather than a
/// second kernel (which is faster depends on the shape: the tuner times both).
struct ConvConfig {
  int tile = 0;
  int splits = 1;
  bool reduce_in_kernel = false;
  bool operator==(const ConvConfig& o) const {
    return tile == o.tile && splits == o.splits && reduce_in_kernel == o.reduce_in_kernel;
  }
};

/// A block tile: bm output pixels × bn output channels, `threads` per block.
struct ConvTile {
  int bm, bn, threads;
  const char* name;  // "128x64"
};

/// The tiles a precision can use. kFp32 (exact, CUDA cores): one 64×64 tile. kTf32/kFp16/kBf16
/// (mma.sync, fp32 accumulation, 3-stage cp.async pipeline): 128×128, 128×64, 64×128, 64×64,
/// 64×32, 32×64 with 64×32, 32×32 or smaller warp tiles, 128×128w4 (4 warps of 64×64: fewer
/// shared-memory reads per mma, more registers), and 128×32 (4 warps of 64×16: for layers of few
/// output channels over many pixels, such as a DB detector's 96→24 head).
const std::vector<ConvTile>& conv_tiles(MmaType type);

/// The type a convolution of this shape runs at: `type`, or kFp32 (exact, CUDA cores) for shapes
/// the tensor-core kernel does not take (a window of more than 64 positions, or 2^31 or more
/// elements in one image's input or output).
MmaType conv_engine(const ConvShape& p, MmaType type);

/// Split counts worth trying for this shape and tile: 1, and powers of two while the grid stays
/// within about four blocks per multiprocessor and each split keeps at least 4 K tiles (≤ 16).
std::vector<int> conv_split_choices(const ConvShape& p, MmaType type, int tile, int multiprocessors);
/// Every (tile, splits) pair the tuner may time, in a fixed order.
std::vector<ConvConfig> conv_candidates(const ConvShape& p, MmaType type, int multiprocessors);
/// The pick without measurement: a 64×64 tile and splits for about two blocks per multiprocessor.
ConvConfig conv_default_config(const ConvShape& p, MmaType type, int multiprocessors);
/// Scratch for the partial sums of `splits` K ranges (0 for one).
std::size_t conv_partial_bytes(const ConvShape& p, int splits);
/// Output tiles (blocks of one K range) of a launch with this tile: the counters its split-K
/// reduction in the kernel needs.
int conv_split_tiles(const ConvShape& p, MmaType type, int tile);

/// Arrival counters for split-K reduced inside the tensor-core kernel: the last block of each
/// output tile to finish adds the splits' partial sums in split order (the bits of the separate
/// reduction) and runs the epilogue, so no second kernel is launched. The counters are device
/// memory that is zero at load and that each launch leaves at zero (CUDA graph replays), from a
/// process-wide pool of 2^20 handed out here on the host, no CUDA call: a kernel holds its range
/// for its lifetime, so launches that may overlap (plans on other streams) never share one.
/// base() < 0 (none asked, or the pool is spent): launches add the splits in a separate kernel.
class SplitKCounters {
 public:
  SplitKCounters() = default;
  explicit SplitKCounters(int tiles);
  ~SplitKCounters();
  SplitKCounters(SplitKCounters&& o) noexcept;
  SplitKCounters& operator=(SplitKCounters&& o) noexcept;
  SplitKCounters(const SplitKCounters&) = delete;
  SplitKCounters& operator=(const SplitKCounters&) = delete;
  int base() const { return base_; }
  int count() const { return count_; }

 private:
  int base_ = -1, count_ = 0;
};

/// The device address of `counters`' first counter (zero between launches), for kernels in other
/// files that add their split-K tiles themselves (rw.ConvNhwc); null when the range is empty. The
/// first call looks the pool up (with relaxed stream capture, so it may come during a capture).
int* split_k_counter_address(const SplitKCounters& counters);

/// Implicit GEMM: M = N·OH·OW output pixels, N = K/groups channels, K = C/groups·R·S, one grid
/// layer per group and split. kFp32: CUDA cores, exact fp32. kTf32/kFp16/kBf16: tensor cores
/// (mma.sync), the operands rounded to that type as fragments are read from shared memory, fp32
/// accumulation. With cfg.splits > 1 the partial sums of each K range go to `partial`
/// (conv_partial_bytes) and are added in a fixed order (deterministic) before the epilogue: in
/// the kernel with cfg.reduce_in_kernel where `counters` has a counter for each output tile
/// (tensor cores only), else by one more kernel; without `partial` the launch runs unsplit. `weights_constant`: w is a constant of
/// the plan (an initializer), which no kernel writes, so the tensor-core kernel starts loading it
/// before pdl_wait() (pdl.cuh); leave it false when w may be an activation.
void launch_conv_implicit_gemm(const ConvShape& p, const float* x, const float* w, float* y, const Epilogue& e,
                               MmaType type, ConvConfig cfg, float* partial, cudaStream_t stream,
                               bool weights_constant = false, const SplitKCounters* counters = nullptr);

/// One input channel per group (depthwise, channel multiplier K/groups): direct, fp32.
void launch_conv_depthwise(const ConvShape& p, const float* x, const float* w, float* y, const Epilogue& e,
                           cudaStream_t stream);

/// ConvTranspose (2-D), direct gather over the inputs that reach each output, fp32. w is
/// [C, K/groups, R, S]; out_pad is folded into oh/ow by the caller.
void launch_conv_transpose(const ConvShape& p, const float* x, const float* w, float* y, const Epilogue& e,
                           cudaStream_t stream);

}  // namespace redwood::cuda::kernels
