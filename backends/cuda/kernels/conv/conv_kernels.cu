// Convolution kernels: implicit GEMM on CUDA cores (exact fp32) and on tensor cores
// (conv_mma.cuh: tf32, fp16, bf16 operands; fp32 accumulation), depthwise and transposed
// convolution, each with the fused epilogue y = act(conv + bias + residual). The GEMM view and the
// split-K bookkeeping are in conv_common.cuh; the tiles a launch may use are listed here
// (conv_tiles) and picked per shape by the Conv kernel's tuner (conv.cpp).

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/conv/conv_common.cuh"
#include "backends/cuda/kernels/conv/conv_kernels.hpp"
#include "backends/cuda/kernels/conv/conv_mma.cuh"
#include "backends/cuda/kernels/pdl.cuh"

#include <algorithm>
#include <iterator>
#include <map>
#include <mutex>
#include <utility>

namespace redwood::cuda::kernels {
namespace {

using namespace conv;

// partial is [split][group][n][m]; i runs over [group][n][m], as y's channels and pixels.
__global__ void splitk_reduce(ConvShape p, const float* __restrict__ partial, float* __restrict__ y, Epilogue e,
                              int splits, long long total) {
  pdl_wait();
  pdl_launch_dependents();
  const Geometry g = geometry(p);
  RW_GRID_STRIDE(i, total) {
    const int m = static_cast<int>(i % g.m_total);
    const int oc = static_cast<int>(i / g.m_total);  // group · Kg + n
    float acc = 0.f;
    for (int s = 0; s < splits; ++s) acc += partial[i + s * total];
    store_y(p, g, y, e, m, oc, acc);
  }
}

// Element A[m][kidx] of group `grp`, zero outside the image (padding) or past the edges.
__device__ __forceinline__ float load_a(const ConvShape& p, const Geometry& g, const float* x, int grp, bool m_ok,
                                        int image, int oy, int ox, int kidx, int k_end) {
  if (!m_ok || kidx >= k_end) return 0.f;
  const int ci = kidx / g.rs;
  const int rem = kidx - ci * g.rs;
  const int ry = rem / p.s;
  const int sx = rem - ry * p.s;
  const int iy = oy * p.stride_h - p.pad_h + ry * p.dil_h;
  const int ix = ox * p.stride_w - p.pad_w + sx * p.dil_w;
  if (iy < 0 || iy >= p.h || ix < 0 || ix >= p.w) return 0.f;
  const long long plane = static_cast<long long>(image) * p.c + grp * g.cg + ci;
  return __ldg(x + (plane * p.h + iy) * p.w + ix);
}

// ---- exact fp32 on CUDA cores: 64×64 tile, 256 threads, 4×4 outputs each ----
constexpr int kSimtBM = 64, kSimtBN = 64, kSimtBK = 16;

__global__ void __launch_bounds__(256) conv_simt(ConvShape p, const float* __restrict__ x,
                                                 const float* __restrict__ w, float* __restrict__ y, Epilogue e,
                                                 float* __restrict__ partial) {
  __shared__ float as[kSimtBK][kSimtBM];
  __shared__ float bs[kSimtBK][kSimtBN + 1];
  const Geometry g = geometry(p);
  const KRange kr = k_range(p, g, kSimtBK);
  const int grp = kr.grp;
  const int m0 = blockIdx.x * kSimtBM, n0 = blockIdx.y * kSimtBN;
  const int t = threadIdx.x;
  // This thread always loads A rows m0 + t % 64: decode that pixel once.
  const int am = m0 + (t % kSimtBM);
  const bool am_ok = am < g.m_total;
  const int image = am_ok ? am / g.ohw : 0;
  const int pix = am_ok ? am - image * g.ohw : 0;
  const int oy = pix / p.ow, ox = pix - (pix / p.ow) * p.ow;
  const float* wg = w + static_cast<long long>(grp) * g.kg * g.kdim;
  const int tx = t % 16, ty = t / 16;
  float acc[4][4] = {};
  pdl_wait();  // x and y may still be in use by the previous kernel (pdl.cuh)
  for (int k0 = kr.k_begin; k0 < kr.k_end; k0 += kSimtBK) {
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      const int kk = t / kSimtBM + 4 * l;
      as[kk][t % kSimtBM] = load_a(p, g, x, grp, am_ok, image, oy, ox, k0 + kk, kr.k_end);
      const int idx = t + 256 * l;
      const int bk = idx % kSimtBK, bn = idx / kSimtBK;
      const bool ok = n0 + bn < g.kg && k0 + bk < kr.k_end;
      bs[bk][bn] = ok ? __ldg(wg + static_cast<long long>(n0 + bn) * g.kdim + k0 + bk) : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kSimtBK; ++kk) {
      float a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = as[kk][tx + 16 * i];
#pragma unroll
      for (int j = 0; j < 4; ++j) b[j] = bs[kk][ty + 16 * j];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
  pdl_launch_dependents();
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int m = m0 + tx + 16 * i;
    if (m >= g.m_total) continue;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int n = n0 + ty + 16 * j;
      if (n < g.kg) finish(p, g, y, partial, e, kr, m, n, acc[i][j]);
    }
  }
}

__global__ void conv_depthwise(ConvShape p, const float* __restrict__ x, const float* __restrict__ w,
                               float* __restrict__ y, Epilogue e, long long total) {
  pdl_wait();
  pdl_launch_dependents();
  const int kg = p.k / p.groups;
  RW_GRID_STRIDE(i, total) {
    const int ox = static_cast<int>(i % p.ow);
    const int oy = static_cast<int>((i / p.ow) % p.oh);
    const int oc = static_cast<int>((i / (static_cast<long long>(p.ow) * p.oh)) % p.k);
    const long long image = i / (static_cast<long long>(p.ow) * p.oh * p.k);
    const int ci = oc / kg;
    const float* xp = x + (image * p.c + ci) * p.h * p.w;
    const float* wp = w + static_cast<long long>(oc) * p.r * p.s;
    float acc = 0.f;
    for (int ry = 0; ry < p.r; ++ry) {
      const int iy = oy * p.stride_h - p.pad_h + ry * p.dil_h;
      if (iy < 0 || iy >= p.h) continue;
      for (int sx = 0; sx < p.s; ++sx) {
        const int ix = ox * p.stride_w - p.pad_w + sx * p.dil_w;
        if (ix >= 0 && ix < p.w) acc = fmaf(__ldg(xp + iy * p.w + ix), __ldg(wp + ry * p.s + sx), acc);
      }
    }
    if (e.bias != nullptr) acc += __ldg(e.bias + oc);
    if (e.residual != nullptr) acc += __ldg(e.residual + i);
    y[i] = activate(acc, e.act, e.alpha, e.beta);
  }
}

// y[n, oc, oy, ox] = Σ over ic of oc's group, (r, s) with oy = iy·sh − ph + r·dh: x[n, ic, iy, ix] · w[ic, oc_g, r, s]
__global__ void conv_transpose(ConvShape p, const float* __restrict__ x, const float* __restrict__ w,
                               float* __restrict__ y, Epilogue e, long long total) {
  pdl_wait();
  pdl_launch_dependents();
  const int kg = p.k / p.groups, cg = p.c / p.groups;
  RW_GRID_STRIDE(i, total) {
    const int ox = static_cast<int>(i % p.ow);
    const int oy = static_cast<int>((i / p.ow) % p.oh);
    const int oc = static_cast<int>((i / (static_cast<long long>(p.ow) * p.oh)) % p.k);
    const long long image = i / (static_cast<long long>(p.ow) * p.oh * p.k);
    const int grp = oc / kg, ocg = oc - grp * kg;
    float acc = 0.f;
    for (int ry = 0; ry < p.r; ++ry) {
      const int ty = oy + p.pad_h - ry * p.dil_h;
      if (ty < 0 || ty % p.stride_h != 0) continue;
      const int iy = ty / p.stride_h;
      if (iy >= p.h) continue;
      for (int sx = 0; sx < p.s; ++sx) {
        const int tx = ox + p.pad_w - sx * p.dil_w;
        if (tx < 0 || tx % p.stride_w != 0) continue;
        const int ix = tx / p.stride_w;
        if (ix >= p.w) continue;
        for (int c = 0; c < cg; ++c) {
          const int ic = grp * cg + c;
          acc = fmaf(__ldg(x + ((image * p.c + ic) * p.h + iy) * p.w + ix),
                     __ldg(w + ((static_cast<long long>(ic) * kg + ocg) * p.r + ry) * p.s + sx), acc);
        }
      }
    }
    if (e.bias != nullptr) acc += __ldg(e.bias + oc);
    if (e.residual != nullptr) acc += __ldg(e.residual + i);
    y[i] = activate(acc, e.act, e.alpha, e.beta);
  }
}

// A transposed convolution whose kernel equals its stride (no overlap, no padding, one group,
// dilation 1; DB detectors' 2x2/2 upsampling heads): each input pixel alone makes an s x s block
// of outputs, out[n, k, iy*sh + dy, ix*sw + dx] = sum_c x[n, c, iy, ix] * w[c, k, dy, dx]. One
// thread per output pixel keeps the pixel's C inputs in registers (CMAX at most; read once, not
// once per output channel as the general kernel does) and makes every output channel, KB at a
// time, from weights in shared memory.
template <int CMAX, int KB>
__global__ void conv_transpose_blocks(ConvShape p, const float* __restrict__ x, const float* __restrict__ w,
                                      float* __restrict__ y, Epilogue e, long long pixels) {
  extern __shared__ float ws[];  // [c][k][r][s], as w
  const int taps = p.r * p.s;
  const int weights = p.c * p.k * taps;
  for (int i = threadIdx.x; i < weights; i += blockDim.x) ws[i] = __ldg(w + i);  // an initializer
  pdl_wait();
  pdl_launch_dependents();
  __syncthreads();
  const long long plane = static_cast<long long>(p.oh) * p.ow;
  RW_GRID_STRIDE(i, pixels) {
    const int ox = static_cast<int>(i % p.ow);
    const int oy = static_cast<int>((i / p.ow) % p.oh);
    const long long image = i / plane;
    const int ix = ox / p.stride_w, dx = ox - ix * p.stride_w;
    const int iy = oy / p.stride_h, dy = oy - iy * p.stride_h;
    const int tap = dy * p.s + dx;
    float xv[CMAX];
#pragma unroll
    for (int c = 0; c < CMAX; ++c) {
      xv[c] = c < p.c ? __ldg(x + ((image * p.c + c) * p.h + iy) * p.w + ix) : 0.f;
    }
    float* out = y + image * p.k * plane + static_cast<long long>(oy) * p.ow + ox;
    for (int k0 = 0; k0 < p.k; k0 += KB) {
      float acc[KB];
#pragma unroll
      for (int j = 0; j < KB; ++j) acc[j] = 0.f;
#pragma unroll
      for (int c = 0; c < CMAX; ++c) {
        if (c >= p.c) break;
        const float* wc = ws + (c * p.k + k0) * taps + tap;
#pragma unroll
        for (int j = 0; j < KB; ++j) {
          if (k0 + j < p.k) acc[j] = fmaf(xv[c], wc[j * taps], acc[j]);
        }
      }
#pragma unroll
      for (int j = 0; j < KB; ++j) {
        const int k = k0 + j;
        if (k >= p.k) break;
        float v = acc[j];
        if (e.bias != nullptr) v += __ldg(e.bias + k);
        const long long at = static_cast<long long>(k) * plane;
        if (e.residual != nullptr) v += __ldg(e.residual + (out - y) + at);
        out[at] = activate(v, e.act, e.alpha, e.beta);
      }
    }
  }
}

// Whether conv_transpose_blocks runs this shape, and with how many input channels in registers.
int transpose_blocks_cmax(const ConvShape& p) {
  if (p.groups != 1 || p.r != p.stride_h || p.s != p.stride_w || p.dil_h != 1 || p.dil_w != 1) return 0;
  if (p.pad_h != 0 || p.pad_w != 0 || p.oh != p.h * p.stride_h || p.ow != p.w * p.stride_w) return 0;
  if (static_cast<long long>(p.c) * p.k * p.r * p.s * sizeof(float) > 48 * 1024) return 0;
  return p.c <= 16 ? 16 : p.c <= 32 ? 32 : p.c <= 64 ? 64 : 0;
}


// ---- the tensor-core tiles: one row per ConvTile of conv_tiles(), in that order ----
template <typename T> struct MmaLaunch {
  using Kernel = void (*)(ConvShape, const float*, const float*, float*, Epilogue, float*, int, int);
  Kernel kernel;
  int smem, threads, bm, bn;
};

template <typename T, int BM, int BN, int WM, int WN> MmaLaunch<T> mma_entry() {
  using Tile = MmaTile<BM, BN, WM, WN>;
  return {conv_mma<T, BM, BN, WM, WN>, Tile::template smem_bytes<T>(), Tile::kThreads, BM, BN};
}

constexpr int kMmaTiles = 8;
template <typename T> const MmaLaunch<T>& mma_launch(int tile) {
  static const MmaLaunch<T> table[kMmaTiles] = {
      mma_entry<T, 128, 128, 64, 32>(), mma_entry<T, 128, 64, 64, 32>(), mma_entry<T, 64, 128, 64, 32>(),
      mma_entry<T, 64, 64, 32, 32>(),   mma_entry<T, 64, 32, 32, 16>(),  mma_entry<T, 32, 64, 16, 32>(),
      mma_entry<T, 128, 128, 64, 64>(), mma_entry<T, 128, 32, 64, 16>()};
  // More than 48 KiB of dynamic shared memory needs the kernel's opt-in, once per process.
  static std::once_flag opted_in;
  std::call_once(opted_in, [] {
    for (const MmaLaunch<T>& l : table) {
      RW_CUDA_CHECK(cudaFuncSetAttribute(l.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, l.smem));
    }
  });
  return table[tile];
}

template <typename T>
void launch_mma(const ConvShape& p, const float* x, const float* w, float* y, const Epilogue& e, int tile,
                unsigned layers, float* part, bool weights_constant, int counters, cudaStream_t stream) {
  const MmaLaunch<T>& l = mma_launch<T>(tile);
  const long long m_total = static_cast<long long>(p.n) * p.oh * p.ow;
  const int kg = p.k / p.groups;
  const int kdim = p.c / p.groups * p.r * p.s;
  int flags = 0;
  if (p.r == 1 && p.s == 1 && p.stride_h == 1 && p.stride_w == 1 && p.pad_h == 0 && p.pad_w == 0 &&
      (p.oh * p.ow) % 4 == 0) {
    flags |= kVecA;
  }
  if (kdim % 4 == 0) flags |= kVecB;
  if ((p.oh * p.ow) % 4 == 0) flags |= kVecC;
  if (weights_constant) flags |= kConstW;
  const dim3 grid(static_cast<unsigned>((m_total + l.bm - 1) / l.bm), static_cast<unsigned>((kg + l.bn - 1) / l.bn),
                  layers);
  launch_kernel(l.kernel, grid, l.threads, l.smem, stream, p, x, w, y, e, part, flags, counters);
}

int k_tile(MmaType type) { return type == MmaType::kFp32 ? kSimtBK : MmaTile<64, 64, 32, 32>::kBK; }

// The host's view of g_tile_counters (conv_mma.cuh): free ranges by offset, first fit, merged
// again when released.
class TileCounterPool {
 public:
  int reserve(int n) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second < n) continue;
      const int at = it->first, left = it->second - n;
      free_.erase(it);
      if (left > 0) free_.emplace(at + n, left);
      return at;
    }
    return -1;
  }
  void release(int at, int n) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_.emplace(at, n).first;
    if (auto next = std::next(it); next != free_.end() && at + n == next->first) {
      it->second += next->second;
      free_.erase(next);
    }
    if (it != free_.begin()) {
      if (auto prev = std::prev(it); prev->first + prev->second == at) {
        prev->second += it->second;
        free_.erase(it);
      }
    }
  }

 private:
  std::mutex mutex_;
  std::map<int, int> free_{{0, kTileCounterPool}};
};

TileCounterPool& tile_counter_pool() {
  static TileCounterPool pool;
  return pool;
}

}  // namespace

MmaType conv_engine(const ConvShape& p, MmaType type) {
  // The tensor-core kernel keeps a 64-bit mask of the window positions inside the image per pixel
  // and 32-bit offsets within one image.
  const long long per_image = static_cast<long long>(p.c) * p.h * p.w;
  const bool fits = p.r * p.s <= 64 && per_image < (1LL << 31) && static_cast<long long>(p.k) * p.oh * p.ow < (1LL << 31);
  return fits ? type : MmaType::kFp32;
}

const std::vector<ConvTile>& conv_tiles(MmaType type) {
  static const std::vector<ConvTile> simt = {{kSimtBM, kSimtBN, 256, "64x64"}};
  static const std::vector<ConvTile> mma = {{128, 128, 256, "128x128"}, {128, 64, 128, "128x64"},
                                            {64, 128, 128, "64x128"},   {64, 64, 128, "64x64"},
                                            {64, 32, 128, "64x32"},     {32, 64, 128, "32x64"},
                                            {128, 128, 128, "128x128w4"}, {128, 32, 128, "128x32"}};
  return type == MmaType::kFp32 ? simt : mma;
}

SplitKCounters::SplitKCounters(int tiles) {
  if (tiles <= 0) return;
  base_ = tile_counter_pool().reserve(tiles);
  count_ = base_ >= 0 ? tiles : 0;
}

SplitKCounters::~SplitKCounters() {
  if (base_ >= 0) tile_counter_pool().release(base_, count_);
}

SplitKCounters::SplitKCounters(SplitKCounters&& o) noexcept : base_(o.base_), count_(o.count_) {
  o.base_ = -1;
  o.count_ = 0;
}

SplitKCounters& SplitKCounters::operator=(SplitKCounters&& o) noexcept {
  if (this != &o) {
    if (base_ >= 0) tile_counter_pool().release(base_, count_);
    base_ = std::exchange(o.base_, -1);
    count_ = std::exchange(o.count_, 0);
  }
  return *this;
}

int* split_k_counter_address(const SplitKCounters& counters) {
  if (counters.base() < 0 || counters.count() == 0) return nullptr;
  static unsigned* pool = [] {
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    RW_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
    void* address = nullptr;
    const cudaError_t err = cudaGetSymbolAddress(&address, g_tile_counters);
    RW_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
    RW_CUDA_CHECK(err);
    return static_cast<unsigned*>(address);
  }();
  return reinterpret_cast<int*>(pool + counters.base());
}

int conv_split_tiles(const ConvShape& p, MmaType type, int tile) {
  const ConvTile& t = conv_tiles(type).at(static_cast<std::size_t>(tile));
  const long long m_total = static_cast<long long>(p.n) * p.oh * p.ow;
  const long long tiles = ((m_total + t.bm - 1) / t.bm) * ((p.k / p.groups + t.bn - 1) / t.bn) * p.groups;
  return static_cast<int>(std::min<long long>(tiles, kTileCounterPool + 1LL));
}

void launch_conv_implicit_gemm(const ConvShape& p, const float* x, const float* w, float* y, const Epilogue& e,
                               MmaType type, ConvConfig cfg, float* partial, cudaStream_t stream,
                               bool weights_constant, const SplitKCounters* counters) {
  const long long m_total = static_cast<long long>(p.n) * p.oh * p.ow;
  const int kg = p.k / p.groups;
  if (m_total == 0 || kg == 0) return;
  type = conv_engine(p, type);
  const int splits = cfg.splits < 1 || partial == nullptr ? 1 : cfg.splits;
  const int tile = cfg.tile >= 0 && cfg.tile < static_cast<int>(conv_tiles(type).size()) ? cfg.tile : 0;
  float* part = splits > 1 ? partial : nullptr;
  const unsigned layers = static_cast<unsigned>(p.groups * splits);
  // Split-K on the tensor cores adds the splits in the kernel where this launch has a counter
  // for each of its output tiles; else (and on the CUDA cores) splitk_reduce does, after it.
  const bool in_kernel = splits > 1 && cfg.reduce_in_kernel && type != MmaType::kFp32 && counters != nullptr &&
                         counters->base() >= 0 && conv_split_tiles(p, type, tile) <= counters->count();
  const int counter_base = in_kernel ? counters->base() : -1;
  switch (type) {
    case MmaType::kFp32: {
      const dim3 grid(static_cast<unsigned>((m_total + kSimtBM - 1) / kSimtBM), (kg + kSimtBN - 1) / kSimtBN, layers);
      launch_kernel(conv_simt, grid, 256, 0, stream, p, x, w, y, e, part);
      RW_CUDA_CHECK_LAUNCH("conv_simt");
      break;
    }
    case MmaType::kTf32:
      launch_mma<Tf32>(p, x, w, y, e, tile, layers, part, weights_constant, counter_base, stream);
      break;
    case MmaType::kFp16:
      launch_mma<half>(p, x, w, y, e, tile, layers, part, weights_constant, counter_base, stream);
      break;
    default: launch_mma<__nv_bfloat16>(p, x, w, y, e, tile, layers, part, weights_constant, counter_base, stream); break;
  }
  if (type != MmaType::kFp32) RW_CUDA_CHECK_LAUNCH("conv_mma");
  if (splits > 1 && !in_kernel) {
    const long long total = m_total * p.k;
    launch_kernel(splitk_reduce, grid_for(total), 256, 0, stream, p, static_cast<const float*>(partial), y, e, splits,
                  total);
    RW_CUDA_CHECK_LAUNCH("conv_splitk_reduce");
  }
}

std::vector<int> conv_split_choices(const ConvShape& p, MmaType type, int tile, int multiprocessors) {
  const ConvTile& t = conv_tiles(type).at(static_cast<std::size_t>(tile));
  const long long m_total = static_cast<long long>(p.n) * p.oh * p.ow;
  const int kg = p.k / p.groups;
  const long long blocks = ((m_total + t.bm - 1) / t.bm) * ((kg + t.bn - 1) / t.bn) * p.groups;
  const int ktiles = ((p.c / p.groups) * p.r * p.s + k_tile(type) - 1) / k_tile(type);
  std::vector<int> out = {1};
  for (int s = 2; s <= 16 && s <= ktiles / 4 && blocks * s <= 4LL * multiprocessors; s *= 2) out.push_back(s);
  return out;
}

std::vector<ConvConfig> conv_candidates(const ConvShape& p, MmaType type, int multiprocessors) {
  std::vector<ConvConfig> out;
  for (int tile = 0; tile < static_cast<int>(conv_tiles(type).size()); ++tile) {
    for (int s : conv_split_choices(p, type, tile, multiprocessors)) {
      out.push_back({tile, s, false});
      if (s > 1 && type != MmaType::kFp32) out.push_back({tile, s, true});  // the splits added in the kernel
    }
  }
  return out;
}

ConvConfig conv_default_config(const ConvShape& p, MmaType type, int multiprocessors) {
  const int tile = type == MmaType::kFp32 ? 0 : 3;  // 64×64
  const ConvTile& t = conv_tiles(type)[static_cast<std::size_t>(tile)];
  const long long m_total = static_cast<long long>(p.n) * p.oh * p.ow;
  const long long blocks = ((m_total + t.bm - 1) / t.bm) * ((p.k / p.groups + t.bn - 1) / t.bn) * p.groups;
  const int ktiles = ((p.c / p.groups) * p.r * p.s + k_tile(type) - 1) / k_tile(type);
  // About two blocks per multiprocessor, at least 4 K tiles per split, 16 splits at most.
  long long splits = (2LL * multiprocessors + blocks - 1) / blocks;
  splits = std::min<long long>({splits, ktiles / 4, 16});
  return {tile, static_cast<int>(std::max<long long>(splits, 1))};
}

std::size_t conv_partial_bytes(const ConvShape& p, int splits) {
  if (splits <= 1) return 0;
  return static_cast<std::size_t>(splits) * p.n * p.k * p.oh * p.ow * sizeof(float);
}

void launch_conv_depthwise(const ConvShape& p, const float* x, const float* w, float* y, const Epilogue& e,
                           cudaStream_t stream) {
  const long long total = static_cast<long long>(p.n) * p.k * p.oh * p.ow;
  if (total == 0) return;
  launch_kernel(conv_depthwise, grid_for(total), 256, 0, stream, p, x, w, y, e, total);
  RW_CUDA_CHECK_LAUNCH("conv_depthwise");
}

void launch_conv_transpose(const ConvShape& p, const float* x, const float* w, float* y, const Epilogue& e,
                           cudaStream_t stream) {
  const long long total = static_cast<long long>(p.n) * p.k * p.oh * p.ow;
  if (total == 0) return;
  if (const int cmax = transpose_blocks_cmax(p); cmax > 0) {
    const long long pixels = static_cast<long long>(p.n) * p.oh * p.ow;
    const std::size_t smem = static_cast<std::size_t>(p.c) * p.k * p.r * p.s * sizeof(float);
    constexpr int kb = 8;
    auto kernel = cmax == 16 ? conv_transpose_blocks<16, kb> : cmax == 32 ? conv_transpose_blocks<32, kb> : conv_transpose_blocks<64, kb>;
    launch_kernel(kernel, grid_for(pixels), 256, smem, stream, p, x, w, y, e, pixels);
    RW_CUDA_CHECK_LAUNCH("conv_transpose_blocks");
    return;
  }
  launch_kernel(conv_transpose, grid_for(total), 256, 0, stream, p, x, w, y, e, total);
  RW_CUDA_CHECK_LAUNCH("conv_transpose");
}

}  // namespace redwood::cuda::kernels
