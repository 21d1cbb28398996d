// Blocked SGEMM in the Goto/BLIS style, written as plain loops that GCC vectorizes at -O2:
//
//   for each k block (kKc deep):       A was packed once, whole, into kMr-row panels
//     for each task's kNc columns:     pack op(B)[k block, columns] into kNr-column panels
//       for each kNr panel of B:       (kKc x kNr floats: stays in L1)
//         for each kMr panel of A:     micro-kernel: a kMr x kNr tile of C in registers
//
// Tasks are (row block, column block) tiles of C, so a tall-skinny product (MatMul with a large
// batch folded into m) and a short-wide one (Conv: few output channels, many pixels) both spread
// over the workers. Each task owns its tile of C for all k blocks, so no two tasks write the same
// element and the result does not depend on the number of threads.

#include "backends/cpu/reference/gemm_kernel.hpp"

#include "backends/cpu/reference/kernel_util.hpp"

#include <algorithm>
#include <memory>
#include <vector>

namespace redwood::cpu {
namespace {

// Register tile. 4 x 8 floats is 8 SSE registers of accumulators (x86-64 baseline, which is what
// the build targets); it leaves room for the B row and the broadcast A value.
constexpr std::int64_t kMr = 4;
constexpr std::int64_t kNr = 8;
// Cache blocks: a packed kKc x kNr panel of B (8 KiB) stays in L1 while the kMc x kKc block of A
// (128 KiB) streams from L2.
constexpr std::int64_t kKc = 256;
constexpr std::int64_t kMc = 128;
constexpr std::int64_t kNc = 384;
// Below this many multiply-adds, one thread does it all: a task costs about a microsecond.
constexpr std::int64_t kSerialWork = std::int64_t{1} << 17;

std::int64_t round_up(std::int64_t x, std::int64_t to) { return (x + to - 1) / to * to; }

// Packs op(A)[0:m, p0:p0+kc] into panels of kMr rows: panel q holds element (q*kMr + r, p0 + p)
// at q*kc*kMr + p*kMr + r. Rows past m are zero so the micro-kernel never branches.
void pack_a(bool trans, const float* a, std::int64_t lda, std::int64_t m, std::int64_t p0,
            std::int64_t kc, float* out) {
  for (std::int64_t i0 = 0; i0 < m; i0 += kMr) {
    const std::int64_t rows = std::min(kMr, m - i0);
    for (std::int64_t p = 0; p < kc; ++p) {
      float* dst = out + p * kMr;
      for (std::int64_t r = 0; r < rows; ++r) {
        const std::int64_t i = i0 + r;
        dst[r] = trans ? a[(p0 + p) * lda + i] : a[i * lda + (p0 + p)];
      }
      for (std::int64_t r = rows; r < kMr; ++r) dst[r] = 0.0f;
    }
    out += kc * kMr;
  }
}

// Packs op(B)[p0:p0+kc, j0:j0+nc] into panels of kNr columns: panel q holds element
// (p0 + p, j0 + q*kNr + c) at q*kc*kNr + p*kNr + c; columns past nc are zero.
void pack_b(bool trans, const float* b, std::int64_t ldb, std::int64_t p0, std::int64_t kc,
            std::int64_t j0, std::int64_t nc, float* out) {
  const std::int64_t full = nc / kNr * kNr;  // columns in whole panels
  if (!trans) {
    // Row by row, so that B is read sequentially: its rows may be far apart (a 160 x 160
    // image's im2col band), and a column-wise walk would jump between them at every step.
    for (std::int64_t p = 0; p < kc; ++p) {
      const float* src = b + (p0 + p) * ldb + j0;
      for (std::int64_t q0 = 0; q0 < full; q0 += kNr) {
        float* dst = out + q0 * kc + p * kNr;
        for (std::int64_t c = 0; c < kNr; ++c) dst[c] = src[q0 + c];
      }
    }
  } else {
    for (std::int64_t q0 = 0; q0 < full; q0 += kNr) {
      for (std::int64_t c = 0; c < kNr; ++c) {
        const float* src = b + (j0 + q0 + c) * ldb + p0;
        float* dst = out + q0 * kc + c;
        for (std::int64_t p = 0; p < kc; ++p) dst[p * kNr] = src[p];
      }
    }
  }
  if (full < nc) {
    // The last, partial panel, padded with zeros.
    float* panel = out + full * kc;
    for (std::int64_t p = 0; p < kc; ++p) {
      for (std::int64_t c = 0; c < kNr; ++c) {
        const std::int64_t j = j0 + full + c;
        panel[p * kNr + c] = full + c >= nc ? 0.0f
                             : trans       ? b[j * ldb + (p0 + p)]
                                           : b[(p0 + p) * ldb + j];
      }
    }
  }
}

// tile = sum over p of a[p] (a column of kMr) times b[p] (a row of kNr). The fixed trip counts
// let GCC unroll r and vectorize c, keeping the whole tile in registers.
void micro_kernel(std::int64_t kc, const float* __restrict ap, const float* __restrict bp,
                  float* __restrict tile) {
  float acc[kMr][kNr] = {};
  for (std::int64_t p = 0; p < kc; ++p) {
    const float* __restrict av = ap + p * kMr;
    const float* __restrict bv = bp + p * kNr;
#pragma GCC unroll 4
    for (std::int64_t r = 0; r < kMr; ++r) {
      const float ar = av[r];
#pragma GCC unroll 8
      for (std::int64_t c = 0; c < kNr; ++c) acc[r][c] += ar * bv[c];
    }
  }
  for (std::int64_t r = 0; r < kMr; ++r) {
    for (std::int64_t c = 0; c < kNr; ++c) tile[r * kNr + c] = acc[r][c];
  }
}

// Writes (first block) or adds (later blocks) alpha * tile into C's rows x cols corner.
void store_tile(const float* tile, std::int64_t rows, std::int64_t cols, float alpha, float beta,
                bool first_block, float* c, std::int64_t ldc) {
  for (std::int64_t r = 0; r < rows; ++r) {
    float* crow = c + r * ldc;
    const float* trow = tile + r * kNr;
    if (!first_block || beta == 1.0f) {
      for (std::int64_t j = 0; j < cols; ++j) crow[j] += alpha * trow[j];
    } else if (beta == 0.0f) {
      for (std::int64_t j = 0; j < cols; ++j) crow[j] = alpha * trow[j];
    } else {
      for (std::int64_t j = 0; j < cols; ++j) crow[j] = alpha * trow[j] + beta * crow[j];
    }
  }
}

// C = beta * C, for k == 0 (no product to add). beta == 0 writes zeros without reading C.
void scale_c(std::int64_t m, std::int64_t n, float beta, float* c, std::int64_t ldc) {
  for (std::int64_t i = 0; i < m; ++i) {
    float* row = c + i * ldc;
    for (std::int64_t j = 0; j < n; ++j) row[j] = beta == 0.0f ? 0.0f : beta * row[j];
  }
}

}  // namespace

void sgemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
           const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
           std::int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    scale_c(m, n, beta, c, ldc);
    return;
  }

  // A is packed once, whole: every task reads the row panels it needs from every k block.
  // k block kb (starting at depth p0) begins at p0 * m_padded.
  const std::int64_t m_padded = round_up(m, kMr);
  std::unique_ptr<float[]> packed_a(new float[static_cast<std::size_t>(m_padded * k)]);
  for (std::int64_t p0 = 0; p0 < k; p0 += kKc) {
    pack_a(trans_a, a, lda, m, p0, std::min(kKc, k - p0), packed_a.get() + p0 * m_padded);
  }

  const std::int64_t row_blocks = (m + kMc - 1) / kMc;
  const std::int64_t col_blocks = (n + kNc - 1) / kNc;
  auto run_task = [&](std::int64_t task) {
    const std::int64_t i_begin = (task / col_blocks) * kMc;
    const std::int64_t i_end = std::min(m, i_begin + kMc);
    const std::int64_t j_begin = (task % col_blocks) * kNc;
    const std::int64_t nc = std::min(kNc, n - j_begin);
    // Per-thread buffer for the packed block of B. A task makes no oneTBB call while it uses
    // the buffer, so the thread cannot steal another task that would overwrite it.
    thread_local std::vector<float> packed_b;
    packed_b.resize(static_cast<std::size_t>(kKc * round_up(kNc, kNr)));
    float tile[kMr * kNr];
    for (std::int64_t p0 = 0; p0 < k; p0 += kKc) {
      const std::int64_t kc = std::min(kKc, k - p0);
      pack_b(trans_b, b, ldb, p0, kc, j_begin, nc, packed_b.data());
      const float* a_block = packed_a.get() + p0 * m_padded;
      for (std::int64_t j0 = 0; j0 < nc; j0 += kNr) {
        const float* bp = packed_b.data() + (j0 / kNr) * kc * kNr;
        const std::int64_t cols = std::min(kNr, nc - j0);
        for (std::int64_t i0 = i_begin; i0 < i_end; i0 += kMr) {
          micro_kernel(kc, a_block + (i0 / kMr) * kc * kMr, bp, tile);
          store_tile(tile, std::min(kMr, m - i0), cols, alpha, beta, p0 == 0,
                     c + i0 * ldc + j_begin + j0, ldc);
        }
      }
    }
  };

  const std::int64_t tasks = row_blocks * col_blocks;
  if (tasks == 1 || m * n * k <= kSerialWork) {
    for (std::int64_t t = 0; t < tasks; ++t) run_task(t);
    return;
  }
  parallel_for(tasks, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t t = begin; t < end; ++t) run_task(t);
  });
}

}  // namespace redwood::cpu
