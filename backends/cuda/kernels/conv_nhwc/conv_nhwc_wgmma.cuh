#pragma once
// Implicit-GEMM convolution on NHWC activations with Hopper's warpgroup tensor-core instruction
// (wgmma.mma_async, sm_90a only; docs/cuda.md, Kernels, the rw.ConvNhwc row): fp16 and bf16
// storage (k16 products), and fp32 storage at precision tf32 (k8 tf32 products). The same
// operation, arguments, geometry, loader and epilogue (conv_nhwc_common.cuh) as the mma.sync
// kernel (conv_nhwc_mma.cuh, read that first); only the math and the pipeline's schedule differ.
//
// Shared memory: each stage holds A [BM][BK] and B [BN][BK] in rows of 128 bytes (BK 64 16-bit
// elements or 32 floats), each row's 16-byte chunks XORed with row % 8 (swz_chunk<8, E>), which
// is wgmma's 128-byte swizzle for K-major operands when a stage starts on 1024 bytes: so both
// operands are read by the tensor cores straight from shared memory through matrix descriptors
// (make_desc), no ldmatrix, no fragment registers. A k-step (32 bytes: k16 of a 16-bit type, k8
// of tf32) moves a descriptor's start by 32 bytes inside the swizzle atom (the hardware applies
// the XOR to the final address, as CUTLASS's descriptor iterators do).
//
// Warpgroups: WGS groups of 128 threads; group g computes rows [g·BM/WGS, (g+1)·BM/WGS) × all BN
// channels with m64nBNk16 (tf32: k8) instructions (MI = BM / (64·WGS) of them a k-step), accumulating in
// registers (BN/2 floats per instruction a thread).
//
// Schedule (every thread copies, every warpgroup multiplies): tile kt is multiplied by one
// commit group of wgmmas that stays in flight while the loop goes on to wait for tile kt + 1
// and issue the copies of tile kt + STAGES − 2; wgmma.wait_group 1 after each group means tile
// kt − 1's group is done before the barrier of iteration kt + 1, so at that barrier the stage of
// tile kt − 1 is free for the copies issued after it. Copies land through the generic proxy and
// wgmma reads through the async proxy: each thread fences (fence.proxy.async) its landed copies
// before the barrier.
//
// Built only for sm_90a (backends/cuda/CMakeLists.txt, conv_nhwc_wgmma.cu); the tuner offers
// these tiles only on a compute capability 9.0 device (nhwc_wgmma_usable, conv_nhwc.cu).

#include "backends/cuda/kernels/conv_nhwc/conv_nhwc_common.cuh"
#include "backends/cuda/kernels/pdl.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace redwood::cuda::kernels::nhwc {

/// Block tile BM × BN, stage rows of 128 bytes, WGS warpgroups, STAGES pipeline stages (at least
/// 3: one being multiplied, one whose wgmmas may still be in flight, and copies ahead).
template <int BM, int BN, int WGS, int STAGES> struct WgTile {
  static constexpr int kStages = STAGES, kThreads = WGS * 128;
  static constexpr int kWgRows = BM / WGS, kMI = kWgRows / 64, kAcc = BN / 2;
  static constexpr int kLDC = BN + 4;
  static constexpr int kStageABytes = BM * 128, kStageBBytes = BN * 128;
  static constexpr int kPipeBytes = kStages * (kStageABytes + kStageBBytes);
  static constexpr int kEpiBytes = BM * kLDC * 4;
  static constexpr int kDataBytes = kPipeBytes > kEpiBytes ? kPipeBytes : kEpiBytes;  // the two share it
  // + 1024: the dynamic shared memory is aligned up to the swizzle atom in the kernel.
  static constexpr int kSmemBytes = kDataBytes + 1024;
  // Blocks a multiprocessor that the shared memory allows (227 KiB; at most 2048 threads):
  // registers are capped to leave room for as many (__launch_bounds__), so that they never lower
  // the occupancy the shared memory gives (128×64 with 3 stages: three blocks, 80 registers a
  // thread; docs/cuda.md, Kernels).
  static constexpr int kBySmem = 227 * 1024 / kSmemBytes < 1 ? 1 : 227 * 1024 / kSmemBytes;
  static constexpr int kMinBlocks = kBySmem < 2048 / kThreads ? kBySmem : 2048 / kThreads;
  static_assert(STAGES >= 3, "a stage multiplied, one maybe still read by wgmma, copies ahead");
  static_assert(kWgRows % 64 == 0 && (BN == 64 || BN == 128 || BN == 256), "m64 per instruction, n 64/128/256");
  static_assert(kSmemBytes <= 227 * 1024, "shared memory of one multiprocessor");
};

/// A shared-memory matrix descriptor (PTX ISA, "Matrix Descriptor Format" of wgmma): start
/// address >> 4 in bits 0-13; leading byte offset >> 4 in 16-29 (unused for swizzled K-major
/// operands: 1); stride byte offset >> 4 in 32-45 (1024: from one 8-row group of 128-byte rows
/// to the next); base offset 0 (stages start on 1024 bytes); swizzle mode 1 (128 bytes) in 62-63.
__device__ __forceinline__ std::uint64_t make_desc(std::uint32_t smem_addr) {
  return static_cast<std::uint64_t>((smem_addr & 0x3FFFF) >> 4) | (std::uint64_t{1} << 16) |
         (std::uint64_t{1024 >> 4} << 32) | (std::uint64_t{1} << 62);
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Copies this thread made visible to the async proxy (wgmma's operand reads).
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
// Keeps the compiler from moving reads or writes of an accumulator across a wgmma fence or wait.
__device__ __forceinline__ void fence_operand(float& r) { asm volatile("" : "+f"(r)::"memory"); }

/// D[64 × N] += A · B for one k-step (32 bytes of K-dim: k16 of fp16/bf16, k8 of tf32), both
/// operands from shared memory (descriptors), fp32 accumulation, scale-d 1, both K-major (the
/// 16-bit forms' transpose flags 0; tf32 has none: it takes K-major operands only). d holds this
/// thread's N/2 accumulators in the m16n8 fragment order per n8 block: (row g, 2t, 2t+1), (row
/// g + 8, same columns), rows counted from 16 × (warp in the group). With fp32 storage the
/// tensor cores read tf32 from the fp32 bits, ignoring the low 13 mantissa bits (truncation; the
/// mma.sync kernel rounds to nearest with cvt.rna instead; docs/cuda.md, Precision, says how the
/// runner keeps that from biasing a network: operands reach these tiles already rounded to tf32).
/// One specialization per (T, N), generated by RW_WGMMA below: an asm statement names every
/// accumulator register, so the N/2 operands and their PTX list are spelled out once per N.
template <typename T, int N> struct Wgmma;

// The accumulators of an m64nN instruction: asm operands d[0..N/2) and their PTX list %0…, then
// the two descriptors and the scale-d flag (numbered after them).
#define RW_WG_D8(i) \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), \
      "+f"(d[i + 7])
#define RW_WG_D32(i) RW_WG_D8(i), RW_WG_D8(i + 8), RW_WG_D8(i + 16), RW_WG_D8(i + 24)
#define RW_WG_ACC_64 RW_WG_D32(0)
#define RW_WG_ACC_128 RW_WG_D32(0), RW_WG_D32(32)
#define RW_WG_ACC_256 RW_WG_D32(0), RW_WG_D32(32), RW_WG_D32(64), RW_WG_D32(96)
#define RW_WG_REGS_64 \
  "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26," \
  "%27,%28,%29,%30,%31}"
#define RW_WG_REGS_128 \
  "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26," \
  "%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50," \
  "%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}"
#define RW_WG_REGS_256 \
  "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26," \
  "%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50," \
  "%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74," \
  "%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98," \
  "%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,%112,%113,%114,%115,%116,%117,%118," \
  "%119,%120,%121,%122,%123,%124,%125,%126,%127}"
#define RW_WG_ARGS_64 "%32, %33", "%34"
#define RW_WG_ARGS_128 "%64, %65", "%66"
#define RW_WG_ARGS_256 "%128, %129", "%130"

#define RW_WGMMA_(T, N, SHAPE, TYPES, TAIL, REGS, DESCS, SCALE, ...)                                      \
  template <> struct Wgmma<T, N> {                                                                         \
    static __device__ __forceinline__ void mma(float (&d)[N / 2], std::uint64_t da, std::uint64_t db) { \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " SCALE ", 0;\n"                                    \
                   "wgmma.mma_async.sync.aligned." SHAPE "." TYPES " " REGS ", " DESCS ", p, 1, 1" TAIL    \
                   ";\n}\n"                                                                               \
                   : __VA_ARGS__                                                                           \
                   : "l"(da), "l"(db), "r"(1));                                                            \
    }                                                                                                      \
  };
// (An argument that holds commas, expanded, becomes several: the descriptors and scale, then the
// accumulators last, as RW_WGMMA_'s variadic tail.)
#define RW_WGMMA_ARGS_(T, N, SHAPE, TYPES, TAIL, REGS, ARGS, ACC) RW_WGMMA_(T, N, SHAPE, TYPES, TAIL, REGS, ARGS, ACC)
// T, N, the PTX shape and types, and what follows scale-a/scale-b (the 16-bit forms' transposes).
#define RW_WGMMA(T, N, SHAPE, TYPES, TAIL) \
  RW_WGMMA_ARGS_(T, N, SHAPE, TYPES, TAIL, RW_WG_REGS_##N, RW_WG_ARGS_##N, RW_WG_ACC_##N)

RW_WGMMA(half, 64, "m64n64k16", "f32.f16.f16", ", 0, 0")
RW_WGMMA(half, 128, "m64n128k16", "f32.f16.f16", ", 0, 0")
RW_WGMMA(half, 256, "m64n256k16", "f32.f16.f16", ", 0, 0")
RW_WGMMA(__nv_bfloat16, 64, "m64n64k16", "f32.bf16.bf16", ", 0, 0")
RW_WGMMA(__nv_bfloat16, 128, "m64n128k16", "f32.bf16.bf16", ", 0, 0")
RW_WGMMA(__nv_bfloat16, 256, "m64n256k16", "f32.bf16.bf16", ", 0, 0")
RW_WGMMA(float, 64, "m64n64k8", "f32.tf32.tf32", "")
RW_WGMMA(float, 128, "m64n128k8", "f32.tf32.tf32", "")
RW_WGMMA(float, 256, "m64n256k8", "f32.tf32.tf32", "")

#undef RW_WGMMA
#undef RW_WGMMA_ARGS_
#undef RW_WGMMA_
#undef RW_WG_ARGS_256
#undef RW_WG_ARGS_128
#undef RW_WG_ARGS_64
#undef RW_WG_REGS_256
#undef RW_WG_REGS_128
#undef RW_WG_REGS_64
#undef RW_WG_ACC_256
#undef RW_WG_ACC_128
#undef RW_WG_ACC_64
#undef RW_WG_D32
#undef RW_WG_D8

/// Keeps the compiler from moving any accumulator read or write across a wgmma fence or wait.
template <int MI, int ACC> __device__ __forceinline__ void fence_accumulators(float (&acc)[MI][ACC]) {
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int v = 0; v < ACC; ++v) fence_operand(acc[i][v]);
}

/// One K tile's products, shared by both wgmma kernels: the stage at shared addresses sa (MI
/// blocks of 64 rows of A) and sb (B), four k-steps of 32 bytes as one commit group, then
/// wgmma.wait_group 1: the previous tile's group is done (its stage may be reused) while this one
/// runs on.
template <typename T, int BN, int MI, int ACC>
__device__ __forceinline__ void wgmma_k_tile(float (&acc)[MI][ACC], std::uint32_t sa, std::uint32_t sb) {
  fence_accumulators(acc);
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < 4; ++ks) {  // k-steps of 32 bytes (k16 of a 16-bit type, k8 of tf32)
#pragma unroll
    for (int i = 0; i < MI; ++i) {
      Wgmma<T, BN>::mma(acc[i], make_desc(sa + i * 64 * 128 + ks * 32), make_desc(sb + ks * 32));
    }
  }
  wgmma_commit();
  wgmma_wait<1>();
  fence_accumulators(acc);
}

/// Writes a thread's accumulators (MI blocks of m64nBN) into the fp32 output tile cs[BM][LDC],
/// warpgroup wg's WG_ROWS rows, in the m16n8 fragment order per n8 block (Wgmma above); both
/// wgmma kernels end with it, after a barrier that frees the pipeline's memory.
template <int BN, int WG_ROWS, int LDC, int MI, int ACC>
__device__ __forceinline__ void stage_accumulators(const float (&acc)[MI][ACC], float* cs, int wg, int warp,
                                                   int lane) {
  const int g = lane >> 2, tq = lane & 3;
  const int wrow = wg * WG_ROWS + (warp % 4) * 16 + g;
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
      const int row = wrow + 64 * i, col = 8 * j + 2 * tq;
      *reinterpret_cast<float2*>(cs + row * LDC + col) = make_float2(acc[i][4 * j], acc[i][4 * j + 1]);
      *reinterpret_cast<float2*>(cs + (row + 8) * LDC + col) = make_float2(acc[i][4 * j + 2], acc[i][4 * j + 3]);
    }
}

// SC: the projection shortcut's instantiation (ConvLoader's SC; a.x2 set).
template <typename T, int BM, int BN, int WGS, int STAGES, bool SC = false>
__global__ void __launch_bounds__(WgTile<BM, BN, WGS, STAGES>::kThreads, WgTile<BM, BN, WGS, STAGES>::kMinBlocks)
    conv_nhwc_wgmma(ConvArgs<T> a) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Tl = WgTile<BM, BN, WGS, STAGES>;
  // BK: elements of T a stage row of 128 bytes (64 of a 16-bit type, 32 floats).
  constexpr int BK = 128 / static_cast<int>(sizeof(T)), kStages = Tl::kStages, kThreads = Tl::kThreads;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  // Stages start on the 1024-byte swizzle atom (the descriptors' base offset 0).
  unsigned char* const smem =
      smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  T* const as_all = reinterpret_cast<T*>(smem);
  T* const bs_all = reinterpret_cast<T*>(smem + kStages * Tl::kStageABytes);

  const ConvBlock<BM, BN, BK> blk(a);  // this block's output tile and K-dim range (conv_nhwc_common.cuh)
  const int t = threadIdx.x, lane = t & 31, warp = t >> 5;

  // ---- copies (conv_nhwc_common.cuh), as conv_nhwc_mma: rows of 8 chunks (the 128-byte swizzle).
  ConvLoader<T, 8, BM, BN, kThreads, SC> ld(a, blk.m0, blk.n0, blk.k_begin, blk.k_end, t);
  static_assert(decltype(ld)::BK == BK);
  auto load_b = [&](int stage, int k0) { ld.load_b(bs_all + stage * BN * BK, k0); };
  auto load_a = [&](int stage) { ld.load_a(as_all + stage * BM * BK); };

  float acc[Tl::kMI][Tl::kAcc];
#pragma unroll
  for (int i = 0; i < Tl::kMI; ++i)
#pragma unroll
    for (int v = 0; v < Tl::kAcc; ++v) acc[i][v] = 0.f;

  // Prologue: STAGES − 2 tiles ahead (one stage is multiplied, one may still be read by the
  // previous tile's wgmmas). Group 0 holds B of those tiles and A of tile 0; group s, A of tile s.
  constexpr int kAhead = kStages - 2;
#pragma unroll
  for (int s = 0; s < kAhead; ++s) {
    if (s < blk.ktiles) load_b(s, blk.k_begin + s * BK);
  }
  pdl_wait();
#pragma unroll
  for (int s = 0; s < kAhead; ++s) {
    if (s < blk.ktiles) load_a(s);
    cp_async_commit();
  }

  const int wg = warp / 4;
  const std::uint32_t a_base = smem_u32(as_all) + wg * Tl::kWgRows * 128;
  const std::uint32_t b_base = smem_u32(bs_all);
  for (int kt = 0; kt < blk.ktiles; ++kt) {
    cp_async_wait<kAhead - 1>();  // tile kt has landed (this thread's copies) ...
    fence_proxy_async();          // ... visible to wgmma ...
    __syncthreads();              // ... everyone's; and tile kt − 2's wgmmas are done everywhere
    const int next = kt + kAhead;
    if (next < blk.ktiles) {
      load_b(next % kStages, blk.k_begin + next * BK);
      load_a(next % kStages);
    }
    cp_async_commit();
    const int stage = kt % kStages;
    // Tile kt − 1's group is done after it (this one may run on).
    wgmma_k_tile<T, BN>(acc, a_base + stage * Tl::kStageABytes, b_base + stage * Tl::kStageBBytes);
  }
  wgmma_wait<0>();
  fence_accumulators(acc);
  cp_async_wait<0>();
  __syncthreads();  // the pipeline's memory becomes the fp32 [BM][BN + 4] output tile
  pdl_launch_dependents();

  float* const cs = reinterpret_cast<float*>(smem);
  constexpr int LDC = Tl::kLDC;
  stage_accumulators<BN, Tl::kWgRows, LDC>(acc, cs, wg, warp, lane);
  __syncthreads();
  conv_epilogue<T, BM, BN, LDC, kThreads>(a, cs, blk.m0, blk.n0, blk.tile_id, blk.split, blk.splits, t);
#else
  // Built for another architecture: never launched (the tuner offers wgmma tiles only on sm_90a).
  __trap();
#endif
}

}  // namespace redwood::cuda::kernels::nhwc
