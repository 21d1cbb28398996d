#pragma once
// Implicit-GEMM convolution on NHWC 16-bit activations with Hopper's warpgroup tensor-core
// instruction (wgmma.mma_async, sm_90a only; docs/cuda.md, Kernels, the rw.ConvNhwc row): the
// same operation, arguments (ConvArgs), geometry, loader, split-K and epilogue as the mma.sync
// kernel (conv_nhwc_mma.cuh, read that first); only the math and the pipeline's schedule differ.
//
// Shared memory: each stage holds A [BM][64] and B [BN][64] (BK 64: rows of 128 bytes), each row's
// 16-byte chunks XORed with row % 8 (swz<64>), which is wgmma's 128-byte swizzle for K-major
// operands when a stage starts on 1024 bytes: so both operands are read by the tensor cores
// straight from shared memory through matrix descriptors (make_desc), no ldmatrix, no fragment
// registers. A k-step of 16 moves a descriptor's start by 32 bytes inside the swizzle atom (the
// hardware applies the XOR to the final address, as CUTLASS's descriptor iterators do).
//
// Warpgroups: WGS groups of 128 threads; group g computes rows [g·BM/WGS, (g+1)·BM/WGS) × all BN
// channels with m64nBNk16 instructions (MI = BM / (64·WGS) of them a k-step), accumulating in
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

#include "backends/cuda/kernels/conv_nhwc_mma.cuh"

#include <cstdint>

namespace redwood::cuda::kernels::nhwc {

/// Block tile BM × BN, BK 64, WGS warpgroups, STAGES pipeline stages (at least 3: one being
/// multiplied, one whose wgmmas may still be in flight, and copies ahead).
template <int BM, int BN, int WGS, int STAGES> struct WgTile {
  static constexpr int kBK = 64, kStages = STAGES, kThreads = WGS * 128;
  static constexpr int kWgRows = BM / WGS, kMI = kWgRows / 64, kAcc = BN / 2;
  static constexpr int kAJ = BM * 8 / kThreads, kBJ = BN * 8 / kThreads;  // 16-byte copies per thread
  static constexpr int kLDC = BN + 4;
  static constexpr int kStageABytes = BM * 128, kStageBBytes = BN * 128;
  static constexpr int kPipeBytes = kStages * (kStageABytes + kStageBBytes);
  static constexpr int kEpiBytes = BM * kLDC * 4;
  // + 1024: the dynamic shared memory is aligned up to the swizzle atom in the kernel.
  static constexpr int kSmemBytes = (kPipeBytes > kEpiBytes ? kPipeBytes : kEpiBytes) + 1024;
  static_assert(STAGES >= 3, "a stage multiplied, one maybe still read by wgmma, copies ahead");
  static_assert(kWgRows % 64 == 0 && (BN == 64 || BN == 128 || BN == 256), "m64 per instruction, n 64/128/256");
  static_assert(kAJ >= 1 && kBJ >= 1 && BM * 8 % kThreads == 0 && BN * 8 % kThreads == 0,
                "every thread copies whole rows' chunks");
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

/// D[64 × N] += A · B for one k16 step, both operands from shared memory (descriptors), fp32
/// accumulation, scale-d 1, no transposes (both K-major). d holds this thread's N/2 accumulators
/// in the m16n8 fragment order per n8 block: (row g, 2t, 2t+1), (row g + 8, same columns), rows
/// counted from 16 × (warp in the group).
template <typename T, int N> struct Wgmma;
template <> struct Wgmma<half, 64> {
  static __device__ __forceinline__ void mma(float (&d)[32], std::uint64_t da, std::uint64_t db) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,"
        "%27,%28,%29,%30,%31}, "
        "%32, %33, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "l"(da), "l"(db), "r"(1));
  }
};
template <> struct Wgmma<__nv_bfloat16, 64> {
  static __device__ __forceinline__ void mma(float (&d)[32], std::uint64_t da, std::uint64_t db) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,"
        "%27,%28,%29,%30,%31}, "
        "%32, %33, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "l"(da), "l"(db), "r"(1));
  }
};
template <> struct Wgmma<half, 128> {
  static __device__ __forceinline__ void mma(float (&d)[64], std::uint64_t da, std::uint64_t db) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,"
        "%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,"
        "%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, "
        "%64, %65, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(da), "l"(db), "r"(1));
  }
};
template <> struct Wgmma<__nv_bfloat16, 128> {
  static __device__ __forceinline__ void mma(float (&d)[64], std::uint64_t da, std::uint64_t db) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,"
        "%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,"
        "%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, "
        "%64, %65, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(da), "l"(db), "r"(1));
  }
};
template <> struct Wgmma<half, 256> {
  static __device__ __forceinline__ void mma(float (&d)[128], std::uint64_t da, std::uint64_t db) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,"
        "%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,"
        "%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,"
        "%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,"
        "%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,"
        "%121,%122,%123,%124,%125,%126,%127}, "
        "%128, %129, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
          "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
          "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
          "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
          "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
          "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]),
          "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]),
          "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]),
          "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]),
          "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "l"(da), "l"(db), "r"(1));
  }
};
template <> struct Wgmma<__nv_bfloat16, 256> {
  static __device__ __forceinline__ void mma(float (&d)[128], std::uint64_t da, std::uint64_t db) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,"
        "%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,"
        "%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,"
        "%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,"
        "%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,"
        "%121,%122,%123,%124,%125,%126,%127}, "
        "%128, %129, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
          "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
          "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
          "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
          "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
          "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]),
          "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]),
          "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]),
          "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]),
          "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "l"(da), "l"(db), "r"(1));
  }
};

template <typename T, int BM, int BN, int WGS, int STAGES>
__global__ void __launch_bounds__(WgTile<BM, BN, WGS, STAGES>::kThreads, 1) conv_nhwc_wgmma(ConvArgs<T> a) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Tl = WgTile<BM, BN, WGS, STAGES>;
  using Op = Mma16<T>;
  constexpr int BK = 64, kStages = Tl::kStages, kThreads = Tl::kThreads;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  // Stages start on the 1024-byte swizzle atom (the descriptors' base offset 0).
  unsigned char* const smem =
      smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  T* const as_all = reinterpret_cast<T*>(smem);
  T* const bs_all = reinterpret_cast<T*>(smem + kStages * Tl::kStageABytes);

  const ConvShape& p = a.p;
  const int tile_id = blockIdx.x;
  const int n_tile = tile_id % a.n_tiles, m_tile = tile_id / a.n_tiles;
  const int m0 = m_tile * BM, n0 = n_tile * BN;
  const int splits = gridDim.y, split = blockIdx.y;
  const int t = threadIdx.x, lane = t & 31, warp = t >> 5;

  // This split's K-dim range, whole BK tiles (an empty range still writes its zeros).
  const int ktiles_all = (a.kdim + BK - 1) / BK;
  const int per = (ktiles_all + splits - 1) / splits;
  const int k_begin = min(split * per * BK, a.kdim);
  const int k_end = min(k_begin + per * BK, a.kdim);
  const int ktiles = (k_end - k_begin + BK - 1) / BK;

  // ---- copies, as conv_nhwc_mma: thread t copies chunk kc of rows row0 + j·kRowStep.
  constexpr int kCpr = 8, kRowStep = kThreads / kCpr;
  const int kc = t % kCpr, row0 = t / kCpr;

  auto load_b = [&](int stage, int k0) {
    T* bs = bs_all + stage * BN * BK;
    const int k = k0 + kc * 8;
#pragma unroll
    for (int j = 0; j < Tl::kBJ; ++j) {
      const int row = row0 + j * kRowStep, n = n0 + row;
      const bool ok = n < p.k && k < k_end;
      cp_async16(bs + swz<BK>(row, kc), ok ? a.w + static_cast<long long>(n) * a.kdim + k : a.w, ok);
    }
  };

  int pix_off[Tl::kAJ], iy0[Tl::kAJ], ix0[Tl::kAJ];
  const int ohw = p.oh * p.ow;
#pragma unroll
  for (int j = 0; j < Tl::kAJ; ++j) {
    const int m = m0 + row0 + j * kRowStep;
    const bool ok = m < a.m_total;
    const int image = ok ? m / ohw : 0;
    const int pix = ok ? m - image * ohw : 0;
    const int oy = pix / p.ow, ox = pix - oy * p.ow;
    iy0[j] = ok ? oy * p.stride_h - p.pad_h : -(1 << 29);
    ix0[j] = ox * p.stride_w - p.pad_w;
    pix_off[j] = ((image * p.h + oy * p.stride_h - p.pad_h) * p.w + ix0[j]) * p.c;
  }
  int ka = k_begin + kc * 8;
  int fc, fr, fs;
  {
    const int rs = ka / p.c;
    fc = ka - rs * p.c;
    fr = rs / p.s;
    fs = rs - fr * p.s;
  }
  auto load_a = [&](int stage) {
    T* as = as_all + stage * BM * BK;
    const bool k_ok = ka < k_end;
    const int dy = fr * p.dil_h, dx = fs * p.dil_w;
    const int delta = (dy * p.w + dx) * p.c + fc;
#pragma unroll
    for (int j = 0; j < Tl::kAJ; ++j) {
      const bool ok = k_ok && static_cast<unsigned>(iy0[j] + dy) < static_cast<unsigned>(p.h) &&
                      static_cast<unsigned>(ix0[j] + dx) < static_cast<unsigned>(p.w);
      cp_async16(as + swz<BK>(row0 + j * kRowStep, kc), a.x + (ok ? pix_off[j] + delta : 0), ok);
    }
    ka += BK;
    fc += BK;
    while (fc >= p.c) {
      fc -= p.c;
      if (++fs == p.s) {
        fs = 0;
        ++fr;
      }
    }
  };

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
    if (s < ktiles) load_b(s, k_begin + s * BK);
  }
  pdl_wait();
#pragma unroll
  for (int s = 0; s < kAhead; ++s) {
    if (s < ktiles) load_a(s);
    cp_async_commit();
  }

  const int wg = warp / 4;
  const std::uint32_t a_base = smem_u32(as_all) + wg * Tl::kWgRows * 128;
  const std::uint32_t b_base = smem_u32(bs_all);
  for (int kt = 0; kt < ktiles; ++kt) {
    cp_async_wait<kAhead - 1>();  // tile kt has landed (this thread's copies) ...
    fence_proxy_async();          // ... visible to wgmma ...
    __syncthreads();              // ... everyone's; and tile kt − 2's wgmmas are done everywhere
    const int next = kt + kAhead;
    if (next < ktiles) {
      load_b(next % kStages, k_begin + next * BK);
      load_a(next % kStages);
    }
    cp_async_commit();
    const int stage = kt % kStages;
    const std::uint32_t sa = a_base + stage * Tl::kStageABytes, sb = b_base + stage * Tl::kStageBBytes;
#pragma unroll
    for (int i = 0; i < Tl::kMI; ++i)
#pragma unroll
      for (int v = 0; v < Tl::kAcc; ++v) fence_operand(acc[i][v]);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < BK / 16; ++ks) {
#pragma unroll
      for (int i = 0; i < Tl::kMI; ++i) {
        Wgmma<T, BN>::mma(acc[i], make_desc(sa + i * 64 * 128 + ks * 32), make_desc(sb + ks * 32));
      }
    }
    wgmma_commit();
    wgmma_wait<1>();  // tile kt − 1's group is done (this one may run on)
#pragma unroll
    for (int i = 0; i < Tl::kMI; ++i)
#pragma unroll
      for (int v = 0; v < Tl::kAcc; ++v) fence_operand(acc[i][v]);
  }
  wgmma_wait<0>();
#pragma unroll
  for (int i = 0; i < Tl::kMI; ++i)
#pragma unroll
    for (int v = 0; v < Tl::kAcc; ++v) fence_operand(acc[i][v]);
  cp_async_wait<0>();
  __syncthreads();  // the pipeline's memory becomes the fp32 [BM][BN + 4] output tile
  pdl_launch_dependents();

  float* const cs = reinterpret_cast<float*>(smem);
  constexpr int LDC = Tl::kLDC;
  {
    const int g = lane >> 2, tq = lane & 3;
    const int wrow = wg * Tl::kWgRows + (warp % 4) * 16 + g;
#pragma unroll
    for (int i = 0; i < Tl::kMI; ++i)
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        const int row = wrow + 64 * i, col = 8 * j + 2 * tq;
        *reinterpret_cast<float2*>(cs + row * LDC + col) = make_float2(acc[i][4 * j], acc[i][4 * j + 1]);
        *reinterpret_cast<float2*>(cs + (row + 8) * LDC + col) = make_float2(acc[i][4 * j + 2], acc[i][4 * j + 3]);
      }
  }
  __syncthreads();
  // 8 channels of one pixel per step: + bias, + residual, activation, rounded to T once (16 bytes
  // of a 16-bit type, 32 of fp32; load8/store8 of nhwc_vec.cuh).
  auto store = [&](int m, int n, float (&v)[8]) {
    const long long at = static_cast<long long>(m) * p.k + n;
    if (a.bias != nullptr) {
      const float4 b0 = __ldg(reinterpret_cast<const float4*>(a.bias + n));
      const float4 b1 = __ldg(reinterpret_cast<const float4*>(a.bias + n + 4));
      v[0] += b0.x, v[1] += b0.y, v[2] += b0.z, v[3] += b0.w;
      v[4] += b1.x, v[5] += b1.y, v[6] += b1.z, v[7] += b1.w;
    }
    if (a.residual != nullptr) {
      float r[8];
      load8(a.residual + at, r);
#pragma unroll
      for (int q = 0; q < 8; ++q) v[q] += r[q];
    }
#pragma unroll
    for (int q = 0; q < 8; ++q) v[q] = activate(v[q], a.act, a.alpha, a.beta);
    store8(a.y + at, v);
  };
  constexpr int kCols = BN / 8, kSteps = BM * kCols;
  if (splits == 1) {
    for (int idx = t; idx < kSteps; idx += kThreads) {
      const int row = idx / kCols, col = (idx % kCols) * 8;
      const int m = m0 + row, n = n0 + col;
      if (m >= a.m_total || n >= p.k) continue;
      const float4 lo = *reinterpret_cast<const float4*>(cs + row * LDC + col);
      const float4 hi = *reinterpret_cast<const float4*>(cs + row * LDC + col + 4);
      float v[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
      store(m, n, v);
    }
    return;
  }
  // Split-K: this split's partial tile, then the last block of the tile sums all in split order.
  const long long plane = static_cast<long long>(a.m_total) * p.k;
  for (int idx = t; idx < kSteps; idx += kThreads) {
    const int row = idx / kCols, col = (idx % kCols) * 8;
    const int m = m0 + row, n = n0 + col;
    if (m >= a.m_total || n >= p.k) continue;
    float* dst = a.partial + split * plane + static_cast<long long>(m) * p.k + n;
    reinterpret_cast<float4*>(dst)[0] = *reinterpret_cast<const float4*>(cs + row * LDC + col);
    reinterpret_cast<float4*>(dst)[1] = *reinterpret_cast<const float4*>(cs + row * LDC + col + 4);
  }
  __threadfence();  // this block's partial sums are visible device-wide before it counts itself
  __syncthreads();
  __shared__ int is_last;
  if (t == 0) {
    const int arrived = atomicAdd(a.counters + tile_id, 1);
    is_last = arrived == splits - 1;
  }
  __syncthreads();
  if (!is_last) return;
  __threadfence();  // the other splits' sums, counted before this block's increment, are visible
  for (int idx = t; idx < kSteps; idx += kThreads) {
    const int row = idx / kCols, col = (idx % kCols) * 8;
    const int m = m0 + row, n = n0 + col;
    if (m >= a.m_total || n >= p.k) continue;
    float v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    const float* src = a.partial + static_cast<long long>(m) * p.k + n;
    for (int s = 0; s < splits; ++s) {  // fixed order: deterministic whichever block is last
      const float4 lo = __ldcg(reinterpret_cast<const float4*>(src + s * plane));
      const float4 hi = __ldcg(reinterpret_cast<const float4*>(src + s * plane + 4));
      v[0] += lo.x, v[1] += lo.y, v[2] += lo.z, v[3] += lo.w;
      v[4] += hi.x, v[5] += hi.y, v[6] += hi.z, v[7] += hi.w;
    }
    store(m, n, v);
  }
  if (t == 0) a.counters[tile_id] = 0;  // ready for the next launch (which zeroes it anyway)
#else
  // Built for another architecture: never launched (the tuner offers wgmma tiles only on sm_90a).
  __trap();
#endif
}

}  // namespace redwood::cuda::kernels::nhwc
