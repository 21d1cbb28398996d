// Einsum (ONNX opsets 12-22): numpy.einsum's Einstein summation over fp32 operands.
//
// The equation is "term,term,...->output", or without "->" (implicit output). A term is letters
// (a-z, A-Z; spaces are ignored) and at most one "...", which stands for the operand's axes that
// the letters do not name. As in numpy:
//   - a letter names one extent, shared by every operand that uses it (extent 1 broadcasts);
//   - the "..." axes of all operands broadcast together, aligned from the right;
//   - a letter repeated within one term takes that operand's diagonal ("ii->i", "ii" a trace);
//   - an explicit output lists the letters kept, in order, and "..." where the broadcast axes go
//     (it must hold "..." when they exist); every other letter is summed over;
//   - the implicit output is the "..." axes, then the letters that occur once in the equation,
//     in ASCII order (uppercase before lowercase).
//
// Evaluation: each operand becomes a strided view with one axis per distinct label (a diagonal is
// one axis whose stride is the sum of its axes' strides; a broadcast axis has stride 0). Operands
// contract pairwise, left to right, through batched GEMM (sgemm): the labels both hold and a later
// operand or the output needs are the batch, those both hold and nothing needs are K, the others
// M (left) and N (right); labels only one side holds and nothing needs are summed out of it first,
// and each side is packed to [batch, M, K] or [batch, K, N] unless already laid out so. A single
// operand, and the last result's order into the output, go through one loop over the output that
// sums over the labels it drops.

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backends/cpu/reference/gemm_kernel.hpp"
#include "backends/cpu/reference/kernel_util.hpp"
#include "backends/cpu/reference/nn_common.hpp"
#include "backends/cpu/reference/shape_copy.hpp"

namespace redwood::cpu {
namespace {

// Labels: 0-25 'A'-'Z', 26-51 'a'-'z' (ASCII order, that of the implicit output); kLetters + j is
// the j-th broadcast "..." axis, counted from the left of the broadcast "..." shape.
constexpr int kLetters = 52;
// Where "..." stands in a parsed term.
constexpr int kEllipsis = -1;

bool is_letter(char ch) { return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z'); }
int letter_label(char ch) { return ch <= 'Z' ? ch - 'A' : 26 + (ch - 'a'); }

std::string label_name(int label) {
  if (label >= kLetters) return fmt::format("... axis {}", label - kLetters);
  return std::string(1, static_cast<char>(label < 26 ? 'A' + label : 'a' + label - 26));
}

struct Equation {
  std::string text;
  std::vector<std::vector<int>> terms;     // per operand: letter labels and kEllipsis
  std::optional<std::vector<int>> output;  // nullopt: implicit
};

Equation parse_equation(const Node& node, const std::string& text) {
  Equation eq;
  eq.text = text;
  std::string s;
  for (char ch : text) {
    if (ch != ' ') s += ch;
  }
  auto bad = [&](const std::string& what) {
    return InvalidArgument(fmt::format("{}: equation '{}': {}", node.where(), text, what));
  };
  auto parse_term = [&](std::string_view term, const std::string& what) {
    std::vector<int> labels;
    bool ellipsis = false;
    for (std::size_t i = 0; i < term.size();) {
      if (is_letter(term[i])) {
        labels.push_back(letter_label(term[i++]));
      } else if (term.substr(i, 3) == "...") {
        if (ellipsis) throw bad(fmt::format("{} '{}' has more than one '...'", what, term));
        ellipsis = true;
        labels.push_back(kEllipsis);
        i += 3;
      } else {
        throw bad(
            fmt::format("unexpected '{}' in {} '{}' (a term is letters and at most one '...')",
                        term[i], what, term));
      }
    }
    return labels;
  };

  const std::size_t arrow = s.find("->");
  const std::string_view lhs = std::string_view(s).substr(0, arrow);
  for (std::size_t begin = 0;;) {
    const std::size_t comma = lhs.find(',', begin);
    eq.terms.push_back(
        parse_term(lhs.substr(begin, comma - begin), fmt::format("term {}", eq.terms.size())));
    if (comma == std::string_view::npos) break;
    begin = comma + 1;
  }
  if (arrow == std::string::npos) return eq;

  eq.output = parse_term(std::string_view(s).substr(arrow + 2), "the output");
  std::vector<bool> seen(kLetters, false);
  for (int label : *eq.output) {
    if (label == kEllipsis) continue;
    if (seen[label]) throw bad(fmt::format("the output repeats '{}'", label_name(label)));
    seen[label] = true;
    const bool in_input = std::any_of(eq.terms.begin(), eq.terms.end(), [&](const auto& term) {
      return std::find(term.begin(), term.end(), label) != term.end();
    });
    if (!in_input)
      throw bad(fmt::format("the output's '{}' is in no input term", label_name(label)));
  }
  return eq;
}

// An operand (or an intermediate result) as a strided view, one axis per distinct label.
struct View {
  Tensor owner;  // keeps `data` alive
  const float* data = nullptr;
  std::vector<int> labels;
  Shape sizes;
  Strides strides;  // in elements; 0 along a broadcast axis

  std::int64_t index_of(int label) const {
    const auto it = std::find(labels.begin(), labels.end(), label);
    return it == labels.end() ? -1 : it - labels.begin();
  }
  bool has(int label) const { return index_of(label) >= 0; }
};

// The element offset of row-major index `flat` over the first `rank` of (sizes, strides).
std::int64_t offset_of(std::int64_t flat, const Shape& sizes, const Strides& strides,
                       std::size_t rank) {
  std::int64_t off = 0;
  for (std::size_t d = rank; d-- > 0;) {
    off += (flat % sizes[d]) * strides[d];
    flat /= sizes[d];
  }
  return off;
}

// dst (contiguous, axes in `keep`'s order; every label of keep is v's) = v summed over the labels
// that keep leaves out.
void sum_into(const View& v, const std::vector<int>& keep, float* dst) {
  Shape keep_sizes, sum_sizes;
  Strides keep_strides, sum_strides;
  for (int label : keep) {
    const auto p = static_cast<std::size_t>(v.index_of(label));
    keep_sizes.push_back(v.sizes[p]);
    keep_strides.push_back(v.strides[p]);
  }
  for (std::size_t p = 0; p < v.labels.size(); ++p) {
    if (std::find(keep.begin(), keep.end(), v.labels[p]) != keep.end()) continue;
    sum_sizes.push_back(v.sizes[p]);
    sum_strides.push_back(v.strides[p]);
  }
  if (sum_sizes.empty()) {
    detail::copy_strided(reinterpret_cast<const std::byte*>(v.data), keep_sizes, keep_strides,
                         sizeof(float), reinterpret_cast<std::byte*>(dst));
    return;
  }
  const std::int64_t total = shape_numel(keep_sizes);
  const std::int64_t terms = shape_numel(sum_sizes);
  // The innermost summed axis is the tight loop.
  const std::int64_t inner = sum_sizes.back(), inner_stride = sum_strides.back();
  const std::int64_t outer_terms = inner == 0 ? 0 : terms / inner;
  parallel_for(
      total, std::max<std::int64_t>(1, 4096 / std::max<std::int64_t>(1, terms)),
      [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t o = begin; o < end; ++o) {
          const float* base = v.data + offset_of(o, keep_sizes, keep_strides, keep_sizes.size());
          double acc = 0;
          for (std::int64_t s = 0; s < outer_terms; ++s) {
            const float* p = base + offset_of(s, sum_sizes, sum_strides, sum_sizes.size() - 1);
            for (std::int64_t i = 0; i < inner; ++i) acc += p[i * inner_stride];
          }
          dst[o] = static_cast<float>(acc);
        }
      });
}

// v with axes `order` (a subset of its labels), contiguous, summed over the labels order leaves
// out; v itself when it already is that.
View arrange(const View& v, const std::vector<int>& order) {
  if (order == v.labels) {
    const Strides want = contiguous_strides(v.sizes);
    bool contiguous = true;
    for (std::size_t d = 0; d < want.size(); ++d)
      contiguous &= v.sizes[d] <= 1 || v.strides[d] == want[d];
    if (contiguous) return v;
  }
  View out;
  out.labels = order;
  for (int label : order) out.sizes.push_back(v.sizes[static_cast<std::size_t>(v.index_of(label))]);
  out.strides = contiguous_strides(out.sizes);
  out.owner = Tensor::empty(DType::kF32, out.sizes);
  out.data = out.owner.data<float>();
  sum_into(v, order, out.owner.data<float>());
  return out;
}

// The contraction of a and b over their shared labels that `keep` leaves out; the result's axes
// are the batch labels, then a's own, then b's own.
View contract(View a, View b, const std::vector<int>& keep) {
  auto needed = [&](int label) { return std::find(keep.begin(), keep.end(), label) != keep.end(); };
  auto drop_own_sums = [&](View& v, const View& other) {
    std::vector<int> rest;
    for (int label : v.labels) {
      if (other.has(label) || needed(label)) rest.push_back(label);
    }
    if (rest.size() != v.labels.size()) v = arrange(v, rest);
  };
  drop_own_sums(a, b);
  drop_own_sums(b, a);

  std::vector<int> batch, m, k, n;
  for (int label : a.labels) {
    if (!b.has(label)) {
      m.push_back(label);
    } else {
      (needed(label) ? batch : k).push_back(label);
    }
  }
  for (int label : b.labels) {
    if (!a.has(label)) n.push_back(label);
  }
  auto concat = [](std::vector<int> x, const std::vector<int>& y, const std::vector<int>& z) {
    x.insert(x.end(), y.begin(), y.end());
    x.insert(x.end(), z.begin(), z.end());
    return x;
  };
  auto extent = [](const View& v, const std::vector<int>& labels) {
    std::int64_t e = 1;
    for (int label : labels) e *= v.sizes[static_cast<std::size_t>(v.index_of(label))];
    return e;
  };
  const View pa = arrange(a, concat(batch, m, k));
  const View pb = arrange(b, concat(batch, k, n));
  const std::int64_t batches = extent(a, batch), rows = extent(a, m), inner = extent(a, k),
                     cols = extent(b, n);

  View out;
  out.labels = concat(batch, m, n);
  for (int label : out.labels) {
    const View& from = a.has(label) ? a : b;
    out.sizes.push_back(from.sizes[static_cast<std::size_t>(from.index_of(label))]);
  }
  out.strides = contiguous_strides(out.sizes);
  out.owner = Tensor::empty(DType::kF32, out.sizes);
  out.data = out.owner.data<float>();
  float* c = out.owner.data<float>();
  parallel_for(batches, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t e = begin; e < end; ++e) {
      sgemm(false, false, rows, cols, inner, 1.0f, pa.data + e * rows * inner, inner,
            pb.data + e * inner * cols, cols, 0.0f, c + e * rows * cols, cols);
    }
  });
  return out;
}

class EinsumKernel final : public Kernel {
 public:
  EinsumKernel(const Node& node, const KernelInfo& info) {
    RW_EXPECTS(node.has_attr("equation"), InvalidArgument,
               "{}: the attribute 'equation' is missing", node.where());
    eq_ = parse_equation(node, node.attr_string("equation", ""));
    RW_EXPECTS(eq_.terms.size() == node.inputs.size(), InvalidArgument,
               "{}: equation '{}' has {} input terms for {} inputs", node.where(), eq_.text,
               eq_.terms.size(), node.inputs.size());
    for (DType dtype : info.input_dtypes) expect_dtype(node, dtype, {DType::kF32}, "input");
  }

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node;
    const std::size_t count = eq_.terms.size();
    RW_EXPECTS(ctx.inputs.size() == count, InvalidArgument,
               "{}: equation '{}' has {} input terms for {} inputs", node.where(), eq_.text, count,
               ctx.inputs.size());

    // The rank of the broadcast "..." shape.
    std::vector<Tensor> inputs;
    std::vector<std::int64_t> own_ellipsis(count, 0);
    std::int64_t ellipsis_rank = 0;
    for (std::size_t i = 0; i < count; ++i) {
      inputs.push_back(ctx.input(i).contiguous());
      nn::expect_f32(node, inputs[i], "input");
      const auto& term = eq_.terms[i];
      const bool has_ellipsis = std::find(term.begin(), term.end(), kEllipsis) != term.end();
      const auto letters = static_cast<std::int64_t>(term.size()) - (has_ellipsis ? 1 : 0);
      const std::int64_t rank = inputs[i].rank();
      RW_EXPECTS(has_ellipsis ? rank >= letters : rank == letters, InvalidArgument,
                 "{}: equation '{}': input {} {} has rank {} but its term names {} axes{}",
                 node.where(), eq_.text, i, shape_str(inputs[i].shape()), rank, letters,
                 has_ellipsis ? " (and '...')" : "");
      own_ellipsis[i] = has_ellipsis ? rank - letters : 0;
      ellipsis_rank = std::max(ellipsis_rank, own_ellipsis[i]);
    }

    // One view per operand; a repeated label takes the diagonal.
    std::vector<View> views(count);
    for (std::size_t i = 0; i < count; ++i) {
      View& v = views[i];
      v.owner = inputs[i];
      v.data = inputs[i].data<float>();
      std::int64_t axis = 0;
      auto add = [&](int label) {
        const std::int64_t size = inputs[i].dim(axis), stride = inputs[i].strides()[axis];
        ++axis;
        const std::int64_t p = v.index_of(label);
        if (p < 0) {
          v.labels.push_back(label);
          v.sizes.push_back(size);
          v.strides.push_back(stride);
          return;
        }
        RW_EXPECTS(v.sizes[p] == size, InvalidArgument,
                   "{}: equation '{}': input {} {} repeats '{}' over extents {} and {} (a diagonal "
                   "needs equal extents)",
                   node.where(), eq_.text, i, shape_str(inputs[i].shape()), label_name(label),
                   v.sizes[p], size);
        v.strides[p] += stride;
      };
      for (int label : eq_.terms[i]) {
        if (label != kEllipsis) {
          add(label);
          continue;
        }
        for (std::int64_t j = ellipsis_rank - own_ellipsis[i]; j < ellipsis_rank; ++j) {
          add(kLetters + static_cast<int>(j));
        }
      }
    }

    // Every label's extent; an extent of 1 broadcasts (stride 0).
    std::vector<std::int64_t> extent(static_cast<std::size_t>(kLetters + ellipsis_rank), -1);
    for (std::size_t i = 0; i < count; ++i) {
      for (std::size_t p = 0; p < views[i].labels.size(); ++p) {
        std::int64_t& e = extent[static_cast<std::size_t>(views[i].labels[p])];
        const std::int64_t s = views[i].sizes[p];
        RW_EXPECTS(e < 0 || e == 1 || s == 1 || s == e, InvalidArgument,
                   "{}: equation '{}': '{}' has extent {} in input {} {} but {} before",
                   node.where(), eq_.text, label_name(views[i].labels[p]), s, i,
                   shape_str(inputs[i].shape()), e);
        if (e < 0 || e == 1) e = s;
      }
    }
    for (View& v : views) {
      for (std::size_t p = 0; p < v.labels.size(); ++p) {
        const std::int64_t e = extent[static_cast<std::size_t>(v.labels[p])];
        if (v.sizes[p] != e) {
          v.sizes[p] = e;
          v.strides[p] = 0;
        }
      }
    }

    const std::vector<int> out_labels = output_labels(node, ellipsis_rank);
    Shape out_shape;
    for (int label : out_labels) out_shape.push_back(extent[static_cast<std::size_t>(label)]);
    Tensor y = ctx.allocate_output(0, DType::kF32, out_shape);
    ctx.outputs[0] = y;
    if (y.numel() == 0) return;

    View result = views[0];
    for (std::size_t i = 1; i < count; ++i) {
      // Keep what the output or a later operand needs.
      std::vector<int> keep;
      for (const View* v : {&result, &views[i]}) {
        for (int label : v->labels) {
          const bool needed =
              std::find(out_labels.begin(), out_labels.end(), label) != out_labels.end() ||
              std::any_of(views.begin() + static_cast<std::ptrdiff_t>(i) + 1, views.end(),
                          [&](const View& later) { return later.has(label); });
          if (needed && std::find(keep.begin(), keep.end(), label) == keep.end())
            keep.push_back(label);
        }
      }
      result = contract(std::move(result), views[i], keep);
    }
    sum_into(result, out_labels, y.data<float>());
  }

 private:
  std::vector<int> output_labels(const Node& node, std::int64_t ellipsis_rank) const {
    std::vector<int> out;
    if (eq_.output) {
      bool has_ellipsis = false;
      for (int label : *eq_.output) {
        if (label != kEllipsis) {
          out.push_back(label);
          continue;
        }
        has_ellipsis = true;
        for (std::int64_t j = 0; j < ellipsis_rank; ++j)
          out.push_back(kLetters + static_cast<int>(j));
      }
      RW_EXPECTS(
          has_ellipsis || ellipsis_rank == 0, InvalidArgument,
          "{}: equation '{}': '...' stands for {} axes, which the output must keep with '...'",
          node.where(), eq_.text, ellipsis_rank);
      return out;
    }
    for (std::int64_t j = 0; j < ellipsis_rank; ++j) out.push_back(kLetters + static_cast<int>(j));
    std::vector<int> occurrences(kLetters, 0);
    for (const auto& term : eq_.terms) {
      for (int label : term) {
        if (label != kEllipsis) ++occurrences[static_cast<std::size_t>(label)];
      }
    }
    for (int label = 0; label < kLetters; ++label) {
      if (occurrences[static_cast<std::size_t>(label)] == 1) out.push_back(label);
    }
    return out;
  }

  Equation eq_;
};

}  // namespace

RW_REGISTER_KERNEL("Einsum", Device::kCpu, make_factory<EinsumKernel>());

}  // namespace redwood::cpu
