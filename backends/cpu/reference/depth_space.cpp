// DepthToSpace and SpaceToDepth: move blocksize × blocksize blocks between an [N, C, H, W]
// tensor's channels and its pixels. Any dtype: each is one strided byte copy.
//
// SpaceToDepth (opset 1, 13): [N, C, H, W] → [N, C·b², H/b, W/b] (H and W multiples of b),
//   y[n, (dy·b + dx)·C + c, Y, X] = x[n, c, b·Y + dy, b·X + dx]   (space_to_depth.hpp).
// DepthToSpace (opset 1, 11, 13): [N, C, H, W] → [N, C/b², H·b, W·b] (C a multiple of b²), the
// inverse in `mode` DCR (the default; opset 1 has no mode), or in CRD (opset 11) with the channel
// order that keeps each output channel's block together:
//   DCR: y[n, c, b·h + dy, b·w + dx] = x[n, (dy·b + dx)·C' + c, h, w]
//   CRD: y[n, c, b·h + dy, b·w + dx] = x[n, c·b² + dy·b + dx, h, w]        (C' = C/b²)

#include "backends/cpu/reference/kernel_util.hpp"
#include "backends/cpu/reference/shape_copy.hpp"
#include "backends/cpu/reference/space_to_depth.hpp"

namespace redwood::cpu {
namespace {

std::int64_t read_blocksize(const Node& node) {
  RW_EXPECTS(node.has_attr("blocksize"), InvalidArgument, "{}: attribute 'blocksize' is required",
             node.where());
  const std::int64_t b = node.attr_int("blocksize", 0);
  RW_EXPECTS(b > 0, InvalidArgument, "{}: blocksize {} must be positive", node.where(), b);
  return b;
}

// a · b, or InvalidArgument naming the node when that passes int64 (a crafted blocksize).
std::int64_t times(const Node& node, std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  RW_EXPECTS(!__builtin_mul_overflow(a, b, &r), InvalidArgument,
             "{}: {} × {} passes int64's range", node.where(), a, b);
  return r;
}

// The node's input, checked to be [N, C, H, W].
const Tensor& image_input(const KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  RW_EXPECTS(x.rank() == 4, InvalidArgument, "{}: the input must be [N, C, H, W], got {}",
             ctx.node.where(), x.description());
  return x;
}

class DepthToSpaceKernel final : public Kernel {
 public:
  DepthToSpaceKernel(const Node& node, const KernelInfo&) : block_(read_blocksize(node)) {
    const std::string mode = node.attr_string("mode", "DCR");
    RW_EXPECTS(mode == "DCR" || mode == "CRD", InvalidArgument,
               "{}: mode '{}' is neither DCR nor CRD", node.where(), mode);
    crd_ = mode == "CRD";
  }

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node;
    const Tensor& x = image_input(ctx);
    const Shape& s = x.shape();
    const std::int64_t b = block_;
    const Strides& st = x.strides();
    const std::int64_t area = times(node, b, b);
    RW_EXPECTS(s[1] % area == 0, InvalidArgument,
               "{}: {} has channels that are not a multiple of blocksize² = {}", node.where(),
               x.description(), area);
    const std::int64_t c = s[1] / area;
    Tensor y = ctx.allocate_output(0, x.dtype(), {s[0], c, times(node, s[2], b), times(node, s[3], b)});
    // y read as [N, C', H, dy, W, dx]; the strides of c, dy and dx depend on the mode.
    const Strides channel = crd_ ? Strides{b * b * st[1], b * st[1], st[1]}
                                 : Strides{st[1], b * c * st[1], c * st[1]};
    detail::copy_strided(detail::bytes_of(x), {s[0], c, s[2], b, s[3], b},
                         {st[0], channel[0], st[2], channel[1], st[3], channel[2]},
                         dtype_size(x.dtype()), detail::bytes_of(y));
    ctx.outputs[0] = std::move(y);
  }

 private:
  std::int64_t block_;
  bool crd_ = false;
};

class SpaceToDepthKernel final : public Kernel {
 public:
  SpaceToDepthKernel(const Node& node, const KernelInfo&) : block_(read_blocksize(node)) {}

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node;
    const Tensor& x = image_input(ctx);
    const Shape& s = x.shape();
    const std::int64_t b = block_;
    RW_EXPECTS(s[2] % b == 0 && s[3] % b == 0, InvalidArgument,
               "{}: {} has a height or width that is not a multiple of blocksize {}", node.where(),
               x.description(), b);
    Tensor y = ctx.allocate_output(0, x.dtype(), {s[0], times(node, s[1], times(node, b, b)), s[2] / b, s[3] / b});
    space_to_depth(x, b, y);
    ctx.outputs[0] = std::move(y);
  }

 private:
  std::int64_t block_;
};

}  // namespace

RW_REGISTER_KERNEL("DepthToSpace", Device::kCpu, make_factory<DepthToSpaceKernel>());
RW_REGISTER_KERNEL("SpaceToDepth", Device::kCpu, make_factory<SpaceToDepthKernel>());

}  // namespace redwood::cpu
