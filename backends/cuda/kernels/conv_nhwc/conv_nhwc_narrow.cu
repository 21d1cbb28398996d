// The narrow kernel of rw.ConvNhwc (conv_nhwc_narrow.hpp says where it pays). An implicit GEMM
// as conv_nhwc_mma.cuh's, M = N·OH·OW pixels, N-dim = K channels, K-dim = R·S·C with
// k = (r·S + s)·C + c, but the activations are never shared between lanes (no block-wide staging):
//
//   The K-dim is walked in chunks of 32. In chunk q, lane (g, t) (g = lane / 4, t = lane % 4) loads,
//   for each of its pixel rows g and g + 8 of an m16 tile, the 16 bytes at k = 32q + 8t: 8 channels
//   of one window position (C % 8 == 0), zeros outside the image or past the K-dim. The mma's sum
//   over k does not depend on the order of k, so the kernel chooses the order that makes these 16
//   bytes this lane's A fragments: m16n8k16 step 2q takes k 32q + 8t + {0..3} for the fragment's
//   logical k {2t, 2t+1, 2t+8, 2t+9}, step 2q + 1 takes 32q + 8t + {4..7}. The weights (B) are
//   stored in shared memory in that same order, one 8-byte fragment (b0, b1) a lane.
//
//   Likewise the N order: of a group of 8·NB output channels (NB n8 tiles), mma column c of tile j
//   is channel 2·NB·(c / 2) + 2j + c % 2, so the accumulators of lane (g, t) are channels
//   [2·NB·t, 2·NB·t + 2·NB) of rows g and g + 8: one 8-byte (NB 2) or 16-byte (NB 4) vector of the
//   output, its bias and its residual.
//
// Warps stride over the M tiles (the grid is the blocks the GPU holds at once, so each block loads
// the weights once). Without RING a warp takes 16·MT pixels a step, loads all their K-dim into
// registers (MT·2·KQ 16-byte loads a lane in flight, KQ = K-dim chunks), then for each group of
// output channels runs KQ·2·MT·NB mma and the epilogue. With RING (the "p" variants) a warp
// copies the pixels of its next steps (16 each) by cp.async into a ring of its own in shared
// memory and reads back one step at a time, so loads are always in flight, also while it
// multiplies and stores: what a memory-bound layer needs when a warp's steps are few per
// multiprocessor. Epilogue: + bias (fp32), + residual (the first group's is loaded with the
// pixels), kernels::activate, one rounding to T, stores. Programmatic dependent launch: the
// weights are read before pdl_wait(), everything else after.

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/device.hpp"
#include "backends/cuda/kernels/conv_nhwc/conv_nhwc_common.cuh"
#include "backends/cuda/kernels/conv_nhwc/conv_nhwc_narrow.hpp"
#include "backends/cuda/kernels/cp_async.cuh"
#include "backends/cuda/kernels/device_math.cuh"
#include "backends/cuda/kernels/mma_ops.cuh"
#include "backends/cuda/kernels/pdl.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>

namespace redwood::cuda::kernels {
namespace {

constexpr int kWarps = 4, kThreads = kWarps * 32;

template <typename T> struct NarrowArgs {
  ConvShape p;
  const T* x;         // [N, H, W, C]
  const T* w;         // [K, R, S, C]
  T* y;               // [N, OH, OW, K]
  const T* residual;  // [N, OH, OW, K] or null
  const float* bias;  // [K] or null
  int act;
  float alpha, beta;
  int m_total, kdim;
  int groups;  // groups of 8·NB output channels
  int tiles;   // M tiles of 16·MT pixels
};

// Pixel rows a warp takes at a time, in m16 tiles: enough 16-byte loads in flight a lane, within
// 128 registers (the A fragments are MT·2·KQ·4 registers, the accumulators MT·NB·4, the
// prefetched residual MT·2·NB).
template <int KQ, int NB> constexpr int rows_of() { return KQ == 1 ? (NB == 2 ? 4 : 2) : KQ <= 3 ? 2 : 1; }

// The 2·NB output channels of a lane in one row, as raw 16-bit pairs.
template <int NB> struct Run {
  std::uint32_t u[NB];
};
template <int NB> __device__ __forceinline__ Run<NB> load_run(const void* p) {
  Run<NB> r;
  if constexpr (NB == 4) {
    const uint4 v = __ldg(static_cast<const uint4*>(p));
    r.u[0] = v.x, r.u[1] = v.y, r.u[2] = v.z, r.u[3] = v.w;
  } else {
    static_assert(NB == 2, "runs of 4 or 8 channels");
    const uint2 v = __ldg(static_cast<const uint2*>(p));
    r.u[0] = v.x, r.u[1] = v.y;
  }
  return r;
}
template <int NB> __device__ __forceinline__ void store_run(void* p, const Run<NB>& r) {
  if constexpr (NB == 4) {
    *static_cast<uint4*>(p) = make_uint4(r.u[0], r.u[1], r.u[2], r.u[3]);
  } else {
    *static_cast<uint2*>(p) = make_uint2(r.u[0], r.u[1]);
  }
}

// 16 or 8 bytes global → shared through L1 (.ca: the stem's windows overlap), zeros where !valid
// (src-size 0 reads nothing; src must still be a valid address).
__device__ __forceinline__ void cp_async_ca16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_ca8(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(smem_u32(dst)), "l"(src), "r"(valid ? 8 : 0));
}

// The layout of one instantiation. RING: each warp copies the pixels of its next tiles (and the
// first channel group's residual) with cp.async into a ring of kStages stages of its own in shared
// memory, one m16 tile a step; every lane reads back only what it copied itself, so the ring needs
// no barrier, and a warp always has kStages − 1 tiles' loads in flight. Else the loads go straight
// to registers, MT m16 tiles a step (rows_of).
template <int KQ, int NB, bool RING> struct Layout {
  static constexpr int kMT = RING ? 1 : rows_of<KQ, NB>();
  static constexpr int kStages = RING ? (KQ >= 3 ? 3 : 4) : 0;
  static constexpr int kStageVecs = RING ? 2 * (KQ + 1) * 32 : 0;  // uint4s: A [h][q][lane], residual [h][lane]
  static constexpr int kFrags = KQ * 2 * NB * 32;                     // one channel group's B fragments (uint2)
};

template <typename T, int KQ, int NB, bool RING>
__global__ void __launch_bounds__(kThreads, 4) conv_nhwc_narrow(NarrowArgs<T> a) {
  using L = Layout<KQ, NB, RING>;
  constexpr int MT = L::kMT, kFrags = L::kFrags;
  extern __shared__ uint4 smem_vecs[];
  // [groups][KQ][2][NB][32 lanes] B fragments, then (RING) the warps' rings.
  uint2* const wsm = reinterpret_cast<uint2*>(smem_vecs);
  const ConvShape& p = a.p;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, tq = lane & 3;

  // Weights into shared memory in fragment order (before pdl_wait: initializers), all copies in
  // flight at once. Entry (group, q, half, j, lane l) holds K-dim 32q + 8·(l % 4) + 4·half + {0..3}
  // of the channel that column l / 4 of n8 tile j is in this group.
  const int entries = a.groups * kFrags;
  for (int i = threadIdx.x; i < entries; i += kThreads) {
    const int l = i & 31, j = (i >> 5) % NB, rest = (i >> 5) / NB;
    const int half_step = rest & 1, q = (rest >> 1) % KQ, group = (rest >> 1) / KQ;
    const int col = l >> 2;
    const int n = group * 8 * NB + 2 * NB * (col >> 1) + 2 * j + (col & 1);
    const int k = 32 * q + 8 * (l & 3) + 4 * half_step;
    const bool ok = n < p.k && k < a.kdim;
    cp_async_ca8(wsm + i, ok ? a.w + static_cast<long long>(n) * a.kdim + k : a.w, ok);
  }
  cp_async_commit();

  // This lane's K-dim chunks as (dy, dx) of the window and the element offset from the window's
  // corner; a chunk past the K-dim gets a dy no row passes.
  int kdy[KQ], kdx[KQ], kdelta[KQ];
#pragma unroll
  for (int q = 0; q < KQ; ++q) {
    const int k = 32 * q + 8 * tq;
    if (k < a.kdim) {
      const int tap = k / p.c, c = k - tap * p.c;
      const int r = tap / p.s, s = tap - r * p.s;
      kdy[q] = r * p.dil_h;
      kdx[q] = s * p.dil_w;
      kdelta[q] = (kdy[q] * p.w + kdx[q]) * p.c + c;
    } else {
      kdy[q] = 1 << 29;
      kdx[q] = 0;
      kdelta[q] = 0;
    }
  }
  cp_async_wait<0>();
  __syncthreads();
  pdl_wait();

  const int ohw = p.oh * p.ow;
  const int lane_n = 2 * NB * tq;  // this lane's first channel within a group
  // Where row m's window starts: the element offset of its corner in x, and the corner's row and
  // column (a row past M gets one that passes no bounds check).
  auto row_of = [&](int m, int& iy0, int& ix, int& corner) {
    const bool ok = m < a.m_total;
    const int image = ok ? m / ohw : 0;
    const int pix = ok ? m - image * ohw : 0;
    const int oy = pix / p.ow, ox = pix - oy * p.ow;
    const int iy = oy * p.stride_h - p.pad_h;
    ix = ox * p.stride_w - p.pad_w;
    iy0 = ok ? iy : -(1 << 28);
    corner = ((image * p.h + iy) * p.w + ix) * p.c;
  };
  auto in_image = [&](int iy0, int ix, int q) {
    return static_cast<unsigned>(iy0 + kdy[q]) < static_cast<unsigned>(p.h) &&
           static_cast<unsigned>(ix + kdx[q]) < static_cast<unsigned>(p.w);
  };
  const bool res_lane = a.residual != nullptr && lane_n < p.k;

  // The products and the epilogue of the 16·MT pixels from m_base, their K-dim in av and the
  // first group's residual runs in res.
  auto finish = [&](int m_base, const uint4 (&av)[MT][2][KQ], const Run<NB> (&res)[MT][2]) {
    for (int group = 0; group < a.groups; ++group) {
      float acc[MT][NB][4];
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NB; ++j)
#pragma unroll
          for (int v = 0; v < 4; ++v) acc[i][j][v] = 0.f;
      const uint2* wg = wsm + group * kFrags;
#pragma unroll
      for (int q = 0; q < KQ; ++q)
#pragma unroll
        for (int hs = 0; hs < 2; ++hs) {
          uint2 b[NB];
#pragma unroll
          for (int j = 0; j < NB; ++j) b[j] = wg[((q * 2 + hs) * NB + j) * 32 + lane];
#pragma unroll
          for (int i = 0; i < MT; ++i) {
            // a0 a2: row g's k pairs, a1 a3: row g + 8's (mma_ops.cuh's fragment order).
            const uint4& r0 = av[i][0][q];
            const uint4& r1 = av[i][1][q];
            const std::uint32_t af[4] = {hs ? r0.z : r0.x, hs ? r1.z : r1.x, hs ? r0.w : r0.y, hs ? r1.w : r1.y};
#pragma unroll
            for (int j = 0; j < NB; ++j) mma_m16n8k16<T>(acc[i][j], af, b[j].x, b[j].y);
          }
        }

      // Epilogue: lane (g, t) holds channels n .. n + 2·NB − 1 of rows g and g + 8 of each m16 tile.
      const int n = group * 8 * NB + lane_n;
      if (n >= p.k) continue;  // K % 8 == 0: a lane's run is all in or all out
      float bias[2 * NB];
#pragma unroll
      for (int v = 0; v < 2 * NB; ++v) bias[v] = 0.f;
      if (a.bias != nullptr) {
#pragma unroll
        for (int v = 0; v < 2 * NB; v += 4) {
          const float4 b4 = __ldg(reinterpret_cast<const float4*>(a.bias + n + v));
          bias[v] = b4.x, bias[v + 1] = b4.y, bias[v + 2] = b4.z, bias[v + 3] = b4.w;
        }
      }
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int m = m_base + 16 * i + 8 * h + g;
          if (m >= a.m_total) continue;
          T* const out = a.y + static_cast<long long>(m) * p.k + n;
          float v[2 * NB];
#pragma unroll
          for (int j = 0; j < NB; ++j) {
            v[2 * j] = acc[i][j][2 * h] + bias[2 * j];
            v[2 * j + 1] = acc[i][j][2 * h + 1] + bias[2 * j + 1];
          }
          if (a.residual != nullptr) {
            const Run<NB> r = group == 0 ? res[i][h] : load_run<NB>(a.residual + static_cast<long long>(m) * p.k + n);
#pragma unroll
            for (int j = 0; j < NB; ++j) {
              const float2 f = unpack2<T>(r.u[j]);
              v[2 * j] += f.x;
              v[2 * j + 1] += f.y;
            }
          }
          Run<NB> o;
#pragma unroll
          for (int j = 0; j < NB; ++j) {
            o.u[j] = pack2<T>(activate(v[2 * j], a.act, a.alpha, a.beta), activate(v[2 * j + 1], a.act, a.alpha, a.beta));
          }
          store_run<NB>(out, o);
        }
    }
  };

  const int first = blockIdx.x * kWarps + warp, stride = gridDim.x * kWarps;
  if constexpr (RING) {
    constexpr int kStages = L::kStages, kVecs = L::kStageVecs;
    uint4* const ring = smem_vecs + (a.groups * kFrags) / 2 + warp * kStages * kVecs;
    const int n_iter = first < a.tiles ? (a.tiles - first + stride - 1) / stride : 0;
    // Step `it`'s pixels (tile first + it·stride) into its stage; a commit either way, so that
    // "group it is done" means "step it has landed".
    auto issue = [&](int it) {
      if (it < n_iter) {
        uint4* const st = ring + (it % kStages) * kVecs;
        const int m_base = (first + it * stride) * 16;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int m = m_base + 8 * h + g;
          int iy0, ix, corner;
          row_of(m, iy0, ix, corner);
#pragma unroll
          for (int q = 0; q < KQ; ++q) {
            const bool in = in_image(iy0, ix, q);
            cp_async_ca16(st + (h * KQ + q) * 32 + lane, in ? a.x + corner + kdelta[q] : a.x, in);
          }
          if (res_lane) {
            const bool ok = m < a.m_total;
            const T* src = ok ? a.residual + static_cast<long long>(m) * p.k + lane_n : a.residual;
            if constexpr (NB == 4) {
              cp_async_ca16(st + (2 * KQ + h) * 32 + lane, src, ok);
            } else {
              cp_async_ca8(st + (2 * KQ + h) * 32 + lane, src, ok);
            }
          }
        }
      }
      cp_async_commit();
    };
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) issue(s);
    for (int it = 0; it < n_iter; ++it) {
      issue(it + kStages - 1);  // into the stage step it − 1 used: its values are in registers and spent
      cp_async_wait<kStages - 1>();
      const uint4* const st = ring + (it % kStages) * kVecs;
      uint4 av[1][2][KQ];
      Run<NB> res[1][2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
#pragma unroll
        for (int q = 0; q < KQ; ++q) av[0][h][q] = st[(h * KQ + q) * 32 + lane];
        const uint4 r = st[(2 * KQ + h) * 32 + lane];  // read only where res_lane (finish)
        res[0][h].u[0] = r.x;
        res[0][h].u[1] = r.y;
        if constexpr (NB == 4) {
          res[0][h].u[2] = r.z;
          res[0][h].u[3] = r.w;
        }
      }
      finish((first + it * stride) * 16, av, res);
    }
    cp_async_wait<0>();
  } else {
    for (int tile = first; tile < a.tiles; tile += stride) {
      const int m_base = tile * 16 * MT;
      uint4 av[MT][2][KQ];
      Run<NB> res[MT][2];
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int m = m_base + 16 * i + 8 * h + g;
          int iy0, ix, corner;
          row_of(m, iy0, ix, corner);
#pragma unroll
          for (int q = 0; q < KQ; ++q) {
            av[i][h][q] = in_image(iy0, ix, q) ? __ldg(reinterpret_cast<const uint4*>(a.x + corner + kdelta[q]))
                                               : make_uint4(0u, 0u, 0u, 0u);
          }
          if (res_lane && m < a.m_total) res[i][h] = load_run<NB>(a.residual + static_cast<long long>(m) * p.k + lane_n);
        }
      finish(m_base, av, res);
    }
  }
  pdl_launch_dependents();
}

// Blocks of `kernel` with `smem` bytes the GPU holds at once (at least one a multiprocessor),
// asked of the runtime once per kernel, size and device: the tuner and the benches time launches
// back to back, where a launcher's host time would show.
long long resident_blocks(const void* kernel, std::size_t smem) {
  int device = 0;
  RW_CUDA_CHECK(cudaGetDevice(&device));
  static std::mutex mutex;
  static std::map<std::tuple<const void*, std::size_t, int>, long long> known;
  const auto key = std::make_tuple(kernel, smem, device);
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = known.find(key); it != known.end()) return it->second;
  const int sms = cuda_device(device).multiprocessors;
  int per_sm = 0;
  RW_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, smem));
  const long long blocks = static_cast<long long>(sms) * (per_sm > 0 ? per_sm : 1);
  known.emplace(key, blocks);
  return blocks;
}

template <typename T, int KQ, int NB, bool RING>
void launch_typed(const ConvShape& p, const void* x, const void* w, void* y, const float* bias, const void* residual,
                  const Epilogue& e, cudaStream_t stream) {
  using L = Layout<KQ, NB, RING>;
  const auto kernel = conv_nhwc_narrow<T, KQ, NB, RING>;
  NarrowArgs<T> a{};
  nhwc::fill_conv_operands<T>(a, p, x, w, y, bias, residual, e);  // no shortcut here: c2 is 0
  a.groups = (p.k + 8 * NB - 1) / (8 * NB);
  a.tiles = (a.m_total + 16 * L::kMT - 1) / (16 * L::kMT);
  const std::size_t smem = static_cast<std::size_t>(a.groups) * L::kFrags * sizeof(uint2) +
                           static_cast<std::size_t>(kWarps) * L::kStages * L::kStageVecs * sizeof(uint4);
  // As many blocks as the GPU holds at once (each loads the weights once), fewer for small M.
  const long long needed = (static_cast<long long>(a.tiles) + kWarps - 1) / kWarps;
  const long long resident = resident_blocks(reinterpret_cast<const void*>(kernel), smem);
  const unsigned blocks = static_cast<unsigned>(needed < resident ? needed : resident);
  RW_CUDA_CHECK(launch_kernel(kernel, dim3(blocks), dim3(kThreads), smem, stream, a));
  RW_CUDA_CHECK_LAUNCH("conv_nhwc_narrow");
}

// Every instantiation's shared-memory opt-in: the rings of K-dim 128 and the weights of 128
// channels pass the 48 KiB a launch gets unasked.
template <typename T, int NB, bool RING> void opt_in_typed() {
  auto opt_in = [](const void* kernel) {
    RW_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 96 * 1024));
  };
  opt_in(reinterpret_cast<const void*>(conv_nhwc_narrow<T, 1, NB, RING>));
  opt_in(reinterpret_cast<const void*>(conv_nhwc_narrow<T, 2, NB, RING>));
  opt_in(reinterpret_cast<const void*>(conv_nhwc_narrow<T, 3, NB, RING>));
  opt_in(reinterpret_cast<const void*>(conv_nhwc_narrow<T, 4, NB, RING>));
}

template <typename T, int NB, bool RING>
void launch_by_kdim(const ConvShape& p, const void* x, const void* w, void* y, const float* bias,
                    const void* residual, const Epilogue& e, cudaStream_t stream) {
  switch ((p.r * p.s * p.c + 31) / 32) {
    case 1: return launch_typed<T, 1, NB, RING>(p, x, w, y, bias, residual, e, stream);
    case 2: return launch_typed<T, 2, NB, RING>(p, x, w, y, bias, residual, e, stream);
    case 3: return launch_typed<T, 3, NB, RING>(p, x, w, y, bias, residual, e, stream);
    default: return launch_typed<T, 4, NB, RING>(p, x, w, y, bias, residual, e, stream);
  }
}

template <typename T>
void launch_variant(const ConvShape& p, const void* x, const void* w, void* y, const float* bias,
                    const void* residual, const Epilogue& e, const NarrowVariant& v, cudaStream_t stream) {
  if (v.channels == 16) {
    if (v.pipelined) return launch_by_kdim<T, 2, true>(p, x, w, y, bias, residual, e, stream);
    return launch_by_kdim<T, 2, false>(p, x, w, y, bias, residual, e, stream);
  }
  if (v.pipelined) return launch_by_kdim<T, 4, true>(p, x, w, y, bias, residual, e, stream);
  return launch_by_kdim<T, 4, false>(p, x, w, y, bias, residual, e, stream);
}

// Once per process, before the first launch.
void opt_in_shared_memory() {
  static std::once_flag once;
  std::call_once(once, [] {
    opt_in_typed<half, 2, false>();
    opt_in_typed<half, 4, false>();
    opt_in_typed<half, 2, true>();
    opt_in_typed<half, 4, true>();
    opt_in_typed<__nv_bfloat16, 2, false>();
    opt_in_typed<__nv_bfloat16, 4, false>();
    opt_in_typed<__nv_bfloat16, 2, true>();
    opt_in_typed<__nv_bfloat16, 4, true>();
  });
}

}  // namespace

bool conv_nhwc_narrow_fits(const ConvShape& p, NhwcStorage storage) {
  const long long kdim = static_cast<long long>(p.r) * p.s * p.c;
  return (storage == NhwcStorage::kF16 || storage == NhwcStorage::kBF16) && p.groups == 1 && p.c % 8 == 0 &&
         p.k % 8 == 0 && p.k > 0 && p.k <= kNarrowMaxK && kdim > 0 && kdim <= kNarrowMaxKdim;
}

const NarrowVariant& narrow_variant(int index) {
  static const NarrowVariant variants[kNarrowVariants] = {
      {16, false, "narrow16"}, {32, false, "narrow32"}, {16, true, "narrow16p"}, {32, true, "narrow32p"}};
  if (index < 0 || index >= kNarrowVariants) {
    throw std::invalid_argument("narrow_variant: no variant " + std::to_string(index) + " (0 to " +
                                std::to_string(kNarrowVariants - 1) + ")");
  }
  return variants[index];
}

void launch_conv_nhwc_narrow(const ConvShape& p, NhwcStorage storage, const void* x, const void* w, void* y,
                             const float* bias, const void* residual, const Epilogue& e, int variant,
                             cudaStream_t stream) {
  const NarrowVariant& v = narrow_variant(variant);
  if (!conv_nhwc_narrow_fits(p, storage)) {
    throw std::invalid_argument("launch_conv_nhwc_narrow: takes fp16/bf16, group 1, C and K multiples of 8, K <= " +
                                std::to_string(kNarrowMaxK) + " and R*S*C <= " + std::to_string(kNarrowMaxKdim) +
                                ", not K " + std::to_string(p.k) + ", R*S*C " + std::to_string(p.r * p.s * p.c));
  }
  if (static_cast<long long>(p.n) * p.oh * p.ow == 0) return;
  opt_in_shared_memory();
  if (storage == NhwcStorage::kF16) {
    launch_variant<half>(p, x, w, y, bias, residual, e, v, stream);
  } else {
    launch_variant<__nv_bfloat16>(p, x, w, y, bias, residual, e, v, stream);
  }
}

}  // namespace redwood::cuda::kernels
