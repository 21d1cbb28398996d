// The TMA-fed wgmma kernels of rw.ConvNhwc (conv_nhwc_wgmma_tma.cuh), instantiated for fp16,
// bf16 and fp32 storage (tf32 products), and their tensor maps. Compiled for sm_90a alone
// (backends/cuda/CMakeLists.txt).

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_error.hpp"
#include "backends/cuda/kernels/conv_nhwc/conv_nhwc_wgmma_tma.cuh"
#include "backends/cuda/kernels/conv_nhwc/conv_nhwc_wgmma_tma.hpp"
#include "backends/cuda/kernels/pdl.cuh"
#include "core/error.hpp"

#include <cudaTypedefs.h>  // the driver's PFN_ types

#include <mutex>
#include <string>
#include <type_traits>

namespace redwood::cuda::kernels::nhwc {
namespace {

template <typename T> struct TmaLaunch {
  void (*kernel)(CUtensorMap, CUtensorMap, ConvArgs<T>);
  int smem, threads, bm, bn;
};

template <typename T, int BM, int BN, int WGS, int STAGES, bool WS = false> TmaLaunch<T> entry() {
  using Tl = TmaTile<BM, BN, WGS, STAGES, WS>;
  return {conv_nhwc_wgmma_tma<T, BM, BN, WGS, STAGES, WS>, Tl::kSmemBytes, Tl::kThreads, BM, BN};
}

// In the order of nhwc_conv_tiles()' tma rows (conv_nhwc.cu): 128×128, 128×256 and 256×128 of
// two warpgroups with 4 stages, 128×64 with 3 stages (three blocks a multiprocessor), 64×128 of
// one warpgroup (for grids that 128-row tiles leave short), 128×128 with 3 stages (two blocks a
// multiprocessor: one's epilogue beside the other's products); then the warp-specialized ones
// (a producer warp more): 128×128 with 4 and 3 stages, 128×64 with 4, 128×256 with 4.
template <typename T> const TmaLaunch<T>& launch_of(int index) {
  static const TmaLaunch<T> table[kWgmmaTmaKernels] = {
      entry<T, 128, 128, 2, 4>(),       entry<T, 128, 256, 2, 4>(),      entry<T, 256, 128, 2, 4>(),
      entry<T, 128, 64, 2, 3>(),        entry<T, 64, 128, 1, 4>(),       entry<T, 128, 128, 2, 3>(),
      entry<T, 128, 128, 2, 4, true>(), entry<T, 128, 128, 2, 3, true>(), entry<T, 128, 64, 2, 4, true>(),
      entry<T, 128, 256, 2, 4, true>()};
  static std::once_flag opted_in;
  std::call_once(opted_in, [] {
    for (const TmaLaunch<T>& l : table) {
      RW_CUDA_CHECK(cudaFuncSetAttribute(l.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, l.smem));
    }
  });
  return table[index];
}

// The driver's encoders, through the runtime's entry-point query (no link against libcuda).
struct Encoders {
  PFN_cuTensorMapEncodeIm2col_v12000 im2col = nullptr;
  PFN_cuTensorMapEncodeTiled_v12000 tiled = nullptr;
};
const Encoders& encoders() {
  static const Encoders e = [] {
    Encoders out;
    cudaDriverEntryPointQueryResult q{};
    void* fn = nullptr;
    RW_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeIm2col", &fn, 12000, cudaEnableDefault, &q));
    RW_EXPECTS(q == cudaDriverEntryPointSuccess && fn != nullptr, Unsupported,
               "rw.ConvNhwc: the driver has no cuTensorMapEncodeIm2col (the TMA tiles need CUDA 12.0 or newer)");
    out.im2col = reinterpret_cast<PFN_cuTensorMapEncodeIm2col_v12000>(fn);
    RW_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q));
    RW_EXPECTS(q == cudaDriverEntryPointSuccess && fn != nullptr, Unsupported,
               "rw.ConvNhwc: the driver has no cuTensorMapEncodeTiled");
    out.tiled = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
    return out;
  }();
  return e;
}

void check_encode(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) {
    throw CudaError(std::string("rw.ConvNhwc: ") + what + " failed (CUresult " + std::to_string(static_cast<int>(r)) +
                    ")");
  }
}

template <typename T> constexpr CUtensorMapDataType map_type() {
  if constexpr (std::is_same_v<T, half>) return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;  // the tensor cores read tf32 from the fp32 bits
}

}  // namespace

bool conv_nhwc_tma_fits(const ConvShape& p, int elem_bytes) {
  const int row = 128 / elem_bytes;  // a stage row's elements
  const int reach_h = (p.r - 1) * p.dil_h;
  return p.c2 == 0 && p.c % row == 0 && p.r == p.s && p.stride_h == p.stride_w && p.pad_h == p.pad_w &&
         p.dil_h == p.dil_w && p.stride_h >= 1 && p.stride_h <= 8 && p.pad_h >= 0 && p.pad_h <= 127 &&
         p.pad_h - reach_h >= -128 && reach_h < 65536 && p.n >= 1 && p.h >= 1 && p.w >= 1;
}

template <typename T> void launch_conv_nhwc_tma(int index, const ConvArgs<T>& a, dim3 grid, cudaStream_t stream) {
  const ConvShape& p = a.p;
  RW_EXPECTS(conv_nhwc_tma_fits(p, static_cast<int>(sizeof(T))), Unsupported,
             "rw.ConvNhwc: the TMA tiles take C a multiple of {} channels, square stride/padding/dilation/filter "
             "and no shortcut input (C {}, filter {}x{}, stride {}x{}, pads {}x{})",
             128 / sizeof(T), p.c, p.r, p.s, p.stride_h, p.stride_w, p.pad_h, p.pad_w);
  const TmaLaunch<T>& l = launch_of<T>(index);
  const auto e = static_cast<cuuint64_t>(sizeof(T));
  // The activations [N, H, W, C], dimensions innermost first; box: BM pixels × a row of channels.
  alignas(64) CUtensorMap x_map{};
  const cuuint64_t x_dims[4] = {static_cast<cuuint64_t>(p.c), static_cast<cuuint64_t>(p.w),
                                static_cast<cuuint64_t>(p.h), static_cast<cuuint64_t>(p.n)};
  const cuuint64_t x_strides[3] = {p.c * e, static_cast<cuuint64_t>(p.w) * p.c * e,
                                   static_cast<cuuint64_t>(p.h) * p.w * p.c * e};
  // The box of window corners: from −pad to the last corner whose window ends pad past the edge.
  const int lower[2] = {-p.pad_w, -p.pad_h};
  const int upper[2] = {p.pad_w - (p.s - 1) * p.dil_w, p.pad_h - (p.r - 1) * p.dil_h};
  const cuuint32_t x_elem_strides[4] = {1, static_cast<cuuint32_t>(p.stride_w), static_cast<cuuint32_t>(p.stride_h),
                                        1};
  check_encode(encoders().im2col(&x_map, map_type<T>(), 4, const_cast<T*>(a.x), x_dims, x_strides, lower, upper,
                                 static_cast<cuuint32_t>(128 / sizeof(T)), static_cast<cuuint32_t>(l.bm),
                                 x_elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                 CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
               "cuTensorMapEncodeIm2col (activations)");
  // The weights [K][K-dim]; box: BN rows × a row of K-dim.
  alignas(64) CUtensorMap w_map{};
  const cuuint64_t w_dims[2] = {static_cast<cuuint64_t>(a.kdim), static_cast<cuuint64_t>(p.k)};
  const cuuint64_t w_strides[1] = {static_cast<cuuint64_t>(a.kdim) * e};
  const cuuint32_t w_box[2] = {static_cast<cuuint32_t>(128 / sizeof(T)), static_cast<cuuint32_t>(l.bn)};
  const cuuint32_t w_elem_strides[2] = {1, 1};
  check_encode(encoders().tiled(&w_map, map_type<T>(), 2, const_cast<T*>(a.w), w_dims, w_strides, w_box,
                                w_elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
               "cuTensorMapEncodeTiled (weights)");
  RW_CUDA_CHECK(launch_kernel(l.kernel, grid, dim3(static_cast<unsigned>(l.threads)),
                              static_cast<std::size_t>(l.smem), stream, x_map, w_map, a));
  RW_CUDA_CHECK_LAUNCH("conv_nhwc_wgmma_tma");
}

template void launch_conv_nhwc_tma<half>(int, const ConvArgs<half>&, dim3, cudaStream_t);
template void launch_conv_nhwc_tma<__nv_bfloat16>(int, const ConvArgs<__nv_bfloat16>&, dim3, cudaStream_t);
template void launch_conv_nhwc_tma<float>(int, const ConvArgs<float>&, dim3, cudaStream_t);

}  // namespace redwood::cuda::kernels::nhwc
