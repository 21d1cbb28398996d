// The oneDNN region kernel (see region.hpp): runs a composite node's body as one chain of oneDNN
// primitives.
//
// Per set of input shapes it builds a plan once, cached: every body node becomes a primitive
// whose output layout oneDNN chooses (convolutions, pooling, concat and resampling ask for
// format_tag::any; eltwise and binary keep their input's layout), a reorder is added only where a
// primitive wants another layout than its input has, and each region output is reordered into a
// plain NCHW tensor right after it is produced. Intermediates live in buffers owned by the plan
// and reused once their last reader has run (eltwise, binary and a Conv's residual sum work in
// place when their input dies there). Weights are reordered once, when the plan is built.
//
// When a plan cannot be built (a shape or dtype oneDNN cannot take, a primitive oneDNN lacks on
// this CPU) the body runs node by node on the ordinary kernels (oneDNN, else reference), which
// also report invalid inputs with their usual messages.

#include "backends/cpu/onednn/conv_primitive.hpp"
#include "backends/cpu/onednn/pool_primitive.hpp"
#include "backends/cpu/onednn/region.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>

namespace redwood::cpu::onednn {
namespace {

class RegionKernel final : public Kernel {
 public:
  RegionKernel(const Node& node, const KernelInfo& info) : body_(node.body), inputs_(node.inputs), outputs_(node.outputs) {
    RW_EXPECTS(!body_.empty(), Unsupported, "{}: empty region", node.where());
    for (std::size_t i = 0; i < node.inputs.size(); ++i) {
      const Tensor* c = i < info.constant_inputs.size() ? info.constant_inputs[i] : nullptr;
      if (c != nullptr) constants_[node.inputs[i]] = c->contiguous();
      dtypes_[node.inputs[i]] = i < info.input_dtypes.size() ? info.input_dtypes[i] : DType::kUndefined;
    }
    // The node-by-node kernels (fallback), and the convolutions' specs.
    for (const Node& n : body_) {
      KernelInfo ki;
      ki.graph = info.graph;
      ki.opset = info.opset;
      for (const auto& in : n.inputs) {
        auto c = constants_.find(in);
        const ValueInfo* vi = in.empty() || info.graph == nullptr ? nullptr : info.graph->find_value(in);
        DType d = c != constants_.end() ? c->second.dtype() : vi ? vi->dtype : DType::kUndefined;
        if (dtypes_.count(in) && d == DType::kUndefined) d = dtypes_.at(in);
        ki.input_dtypes.push_back(d);
        ki.constant_inputs.push_back(c != constants_.end() ? &c->second : nullptr);
      }
      std::unique_ptr<Kernel> kernel;
      std::string failure;
      for (const KernelEntry* e : OpRegistry::instance().candidates(n.op_type, Device::kCpu)) {
        try {
          kernel = e->factory(n, ki);
          break;
        } catch (const Unsupported& err) {
          failure = err.what();
        }
      }
      RW_EXPECTS(kernel != nullptr, Unsupported, "{}: {}", n.where(), failure);
      fallback_.push_back(std::move(kernel));
      specs_.push_back(n.op_type == "Conv" || n.op_type == "ConvTranspose" ? std::optional<ConvSpec>(ConvSpec::from_node(n, ki))
                                                                           : std::nullopt);
      pointwise_.push_back(specs_.back() ? deconv_as_pointwise(n, *specs_.back()) : std::nullopt);
      pools_.push_back(n.op_type.find("Pool") != std::string::npos
                           ? std::optional<PoolSpec>(PoolSpec::from_node(n, ki.input_dtypes))
                           : std::nullopt);
    }
  }

  void run(KernelContext& ctx) override {
    apply_threads();
    // Contiguous non-constant inputs, kept alive for the run, and their shapes: members reused
    // from run to run, so that a run allocates nothing here.
    std::vector<Tensor>& ins = run_inputs_;
    std::vector<Shape>& key = run_key_;
    ins.clear();
    key.clear();
    bool f32 = true;
    for (std::size_t i = 0; i < inputs_.size(); ++i) {
      if (constants_.count(inputs_[i])) continue;
      ins.push_back(ctx.input(i).contiguous());
      key.push_back(ins.back().shape());
      f32 = f32 && ins.back().dtype() == DType::kF32;
    }
    Plan* plan = nullptr;
    if (f32) {
      auto it = plans_.find(key);
      if (it == plans_.end()) it = plans_.emplace(key, build(key)).first;
      plan = it->second.get();
    }
    if (plan == nullptr) {
      ins.clear();
      return run_nodes(ctx);
    }
    for (std::size_t i = 0; i < ins.size(); ++i) plan->inputs[i].set_data_handle(ins[i].raw_data());
    for (std::size_t o = 0; o < outputs_.size(); ++o) {
      ctx.outputs[o] = ctx.allocate_output(o, DType::kF32, plan->output_shapes[o]);
      plan->outputs[o].set_data_handle(ctx.outputs[o].raw_data());
    }
    if (ctx.body_ms == nullptr) {
      for (const Bound& s : plan->steps) s.execute();
      stream().wait();
    } else {
      run_timed(*plan, *ctx.body_ms);
    }
    ins.clear();
  }

 private:
  struct Plan {
    std::vector<Bound> steps;  // over the plan's memories: inputs and outputs get their data per run
    std::vector<std::size_t> step_node;  // per step: the body node it belongs to (its reorders too)
    std::vector<dnnl::memory> inputs, outputs;  // plain; handles set per run
    std::vector<Shape> output_shapes;
    std::vector<Tensor> buffers;                // the intermediates' storage
  };
  // A value while building a plan.
  struct Val {
    dnnl::memory mem;
    Shape shape;
    int buffer = -1;  // index into the plan's buffers; -1 for inputs and constants
    bool plain = false;
  };

  // Builds the plan for these input shapes; nullptr when oneDNN cannot run it.
  std::unique_ptr<Plan> build(const std::vector<Shape>& shapes) {
    Builder b(*this);
    try {
      if (!b.build(shapes)) return nullptr;
    } catch (const dnnl::error&) {
      return nullptr;
    } catch (const Error&) {
      return nullptr;
    }
    return std::move(b.plan);
  }

  struct Builder {
    explicit Builder(RegionKernel& kernel) : k(kernel) {}
    RegionKernel& k;
    std::unique_ptr<Plan> plan = std::make_unique<Plan>();
    std::map<std::string, Val> vals;
    std::map<std::string, std::size_t> last_use;
    std::vector<bool> buffer_free;
    std::map<std::string, int> output_index;
    std::size_t current = 0;  // the body node whose steps are being added

    void* ptr(int b) { return plan->buffers[b].raw_data(); }
    int alloc(std::size_t bytes) {
      int best = -1;
      for (std::size_t i = 0; i < buffer_free.size(); ++i) {
        const std::size_t have = plan->buffers[i].nbytes();
        if (buffer_free[i] && have >= bytes && (best < 0 || have < plan->buffers[best].nbytes())) best = static_cast<int>(i);
      }
      if (best >= 0) {
        buffer_free[best] = false;
        return best;
      }
      plan->buffers.push_back(Tensor::empty(DType::kF32, {static_cast<std::int64_t>((bytes + 3) / 4)}));
      buffer_free.push_back(false);
      return static_cast<int>(plan->buffers.size() - 1);
    }
    Val& define(const std::string& name, const dnnl::memory::desc& md, const Shape& shape, int buffer = -2) {
      if (buffer == -2) buffer = alloc(md.get_size());
      Val v{dnnl::memory(md, engine(), ptr(buffer)), shape, buffer, md == plain_desc(shape)};
      return vals[name] = v;
    }
    void step(dnnl::primitive p, std::unordered_map<int, dnnl::memory> args) {
      Bound b(std::move(p));
      for (auto& [arg, m] : args) b.bind(arg, m);
      plan->steps.push_back(std::move(b));
      plan->step_node.push_back(current);
    }
    // v in layout `want`: v itself, or a reorder into a temporary buffer (freed after the node).
    dnnl::memory as(const Val& v, const dnnl::memory::desc& want, std::vector<int>& temps) {
      if (v.mem.get_desc() == want) return v.mem;
      const int b = alloc(want.get_size());
      temps.push_back(b);
      dnnl::memory m(want, engine(), ptr(b));
      step(dnnl::reorder(v.mem, m), {{DNNL_ARG_FROM, v.mem}, {DNNL_ARG_TO, m}});
      return m;
    }
    // Whether node `i` may write its output over `name` (its last reader, an intermediate).
    bool can_reuse(const std::string& name, std::size_t i, const dnnl::memory::desc& md) {
      const Val& v = vals.at(name);
      return v.buffer >= 0 && last_use.at(name) == i && !output_index.count(name) && v.mem.get_desc() == md;
    }

    bool build(const std::vector<Shape>& shapes) {
      std::size_t next = 0;
      for (const auto& in : k.inputs_) {
        if (vals.count(in)) continue;
        auto c = k.constants_.find(in);
        if (c != k.constants_.end()) {
          const Shape& s = c->second.shape();
          vals[in] = Val{dnnl::memory(plain_desc(s), engine(), c->second.raw_data()), s, -1, true};
        } else {
          const Shape& s = shapes[next++];
          dnnl::memory m(plain_desc(s), engine(), DNNL_MEMORY_NONE);
          plan->inputs.push_back(m);
          vals[in] = Val{m, s, -1, true};
        }
      }
      for (std::size_t o = 0; o < k.outputs_.size(); ++o) output_index[k.outputs_[o]] = static_cast<int>(o);
      plan->outputs.resize(k.outputs_.size());
      plan->output_shapes.resize(k.outputs_.size());
      for (std::size_t i = 0; i < k.body_.size(); ++i) {
        for (const auto& in : k.body_[i].inputs) {
          if (!in.empty()) last_use[in] = i;
        }
      }
      for (std::size_t i = 0; i < k.body_.size(); ++i) {
        const Node& n = k.body_[i];
        current = i;
        std::vector<int> temps;
        std::vector<int> taken;  // buffers an output took over from a dying input
        if (!node(i, n, temps, taken)) return false;
        // Region outputs: into their plain tensors as soon as produced.
        for (const auto& o : n.outputs) {
          auto oi = output_index.find(o);
          if (o.empty() || oi == output_index.end()) continue;
          const Val& v = vals.at(o);
          dnnl::memory out(plain_desc(v.shape), engine(), DNNL_MEMORY_NONE);
          step(dnnl::reorder(v.mem, out), {{DNNL_ARG_FROM, v.mem}, {DNNL_ARG_TO, out}});
          plan->outputs[oi->second] = out;
          plan->output_shapes[oi->second] = v.shape;
        }
        for (int t : temps) buffer_free[t] = true;
        for (const auto& in : n.inputs) {
          if (in.empty() || !vals.count(in) || last_use.at(in) != i || output_index.count(in)) continue;
          const int b = vals.at(in).buffer;
          if (b >= 0 && std::find(taken.begin(), taken.end(), b) == taken.end()) buffer_free[b] = true;
        }
      }
      for (const auto& o : k.outputs_) {
        if (!vals.count(o)) return false;
      }
      return true;
    }

    bool node(std::size_t i, const Node& n, std::vector<int>& temps, std::vector<int>& taken) {
      const std::string& op = n.op_type;
      if (!n.has_input(0)) return false;
      const Val& x = vals.at(n.inputs[0]);
      const dims x_dims(x.shape.begin(), x.shape.end());
      if (k.pointwise_[i]) return deconv_pointwise(n, *k.pointwise_[i], x, temps);
      if (op == "Conv" || op == "ConvTranspose") {
        auto c = make_conv(n, *k.specs_[i], x.shape);
        if (!c) return false;
        const dnnl::memory src = as(x, c->src_md, temps);
        int out_buf = -2;
        std::optional<dnnl::memory> residual;
        if (n.has_input(kResidualInput)) {
          const std::string& r = n.inputs[kResidualInput];
          if (vals.at(r).shape != c->out_shape) return false;
          if (r != n.inputs[0] && can_reuse(r, i, c->dst_md)) {  // not over its own source
            out_buf = vals.at(r).buffer;
            taken.push_back(out_buf);
          } else {
            residual = vals.at(r).mem;
          }
        }
        Val& y = define(n.outputs[0], c->dst_md, c->out_shape, out_buf);
        if (residual) step(dnnl::reorder(*residual, y.mem), {{DNNL_ARG_FROM, *residual}, {DNNL_ARG_TO, y.mem}});
        std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, c->weights}, {DNNL_ARG_DST, y.mem}};
        if (c->bias) args.emplace(DNNL_ARG_BIAS, *c->bias);
        step(c->prim, std::move(args));
        return true;
      }
      if (k.pools_[i]) {
        const auto p = pool_geometry(n, *k.pools_[i], x.shape);
        if (!p) return false;
        const dnnl::memory::desc dst_any(dims(p->out.begin(), p->out.end()), dt::f32, tag::any);
        dnnl::pooling_forward::desc d(dnnl::prop_kind::forward_inference, p->alg, x.mem.get_desc(), dst_any,
                                      p->strides, p->kernel, p->pad_begin, p->pad_end);
        dnnl::pooling_forward::primitive_desc pd(d, engine());
        Val& y = define(n.outputs[0], pd.dst_desc(), p->out);
        step(dnnl::pooling_forward(pd), {{DNNL_ARG_SRC, x.mem}, {DNNL_ARG_DST, y.mem}});
        return true;
      }
      if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") return binary(i, n, temps, taken);
      if (op == "Concat") {
        std::vector<dnnl::memory::desc> mds;
        std::unordered_map<int, dnnl::memory> args;
        for (std::size_t j = 0; j < n.inputs.size(); ++j) {
          const Val& v = vals.at(n.inputs[j]);
          if (v.shape.size() != 4) return false;
          mds.push_back(v.mem.get_desc());
          args.emplace(DNNL_ARG_MULTIPLE_SRC + static_cast<int>(j), v.mem);
        }
        dnnl::concat::primitive_desc pd(1, mds, engine());
        Shape out = x.shape;
        out[1] = 0;
        for (const auto& in : n.inputs) {
          const Shape& s = vals.at(in).shape;
          if (s[0] != out[0] || s[2] != out[2] || s[3] != out[3]) return false;
          out[1] += s[1];
        }
        Val& y = define(n.outputs[0], pd.dst_desc(), out);
        args.emplace(DNNL_ARG_DST, y.mem);
        step(dnnl::concat(pd), std::move(args));
        return true;
      }
      if (op == "Resize") {
        if (x.shape.size() != 4) return false;
        Shape out(4);
        const Tensor* scales = n.has_input(2) && k.constants_.count(n.inputs[2]) ? &k.constants_.at(n.inputs[2]) : nullptr;
        const Tensor* sizes = n.has_input(3) && k.constants_.count(n.inputs[3]) ? &k.constants_.at(n.inputs[3]) : nullptr;
        if (scales != nullptr && scales->numel() == 4) {
          for (int a = 0; a < 4; ++a) {
            const double s = scales->get_as_double(a);
            out[a] = static_cast<std::int64_t>(std::floor(static_cast<double>(x.shape[a]) * s));
          }
        } else if (sizes != nullptr && sizes->numel() == 4) {
          for (int a = 0; a < 4; ++a) out[a] = static_cast<std::int64_t>(sizes->get_as_double(a));
        } else {
          return false;
        }
        if (out[0] != x.shape[0] || out[1] != x.shape[1]) return false;
        for (int a = 2; a < 4; ++a) {
          if (x.shape[a] <= 0 || out[a] < x.shape[a] || out[a] % x.shape[a] != 0) return false;  // integer up-scaling only
        }
        const dnnl::memory::desc dst_any(dims(out.begin(), out.end()), dt::f32, tag::any);
        dnnl::resampling_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::resampling_nearest,
                                         x.mem.get_desc(), dst_any);
        dnnl::resampling_forward::primitive_desc pd(d, engine());
        Val& y = define(n.outputs[0], pd.dst_desc(), out);
        step(dnnl::resampling_forward(pd), {{DNNL_ARG_SRC, x.mem}, {DNNL_ARG_DST, y.mem}});
        return true;
      }
      return unary(i, n, taken);
    }

    // ConvTranspose with kernel == stride: a 1x1 Conv to [N, (i, j, co), H, W] in NCHW, then one
    // reorder that moves element (n, (i, j, co), h, w) to (n, co, h * kh + i, w * kw + j) of the
    // plain output, through 6-D strided views of both buffers.
    bool deconv_pointwise(const Node& n, const ConvSpec& pw, const Val& x, std::vector<int>& temps) {
      auto c = make_conv(n, pw, x.shape, tag::nchw);
      if (!c) return false;
      const dnnl::memory src = as(x, c->src_md, temps);
      const int tb = alloc(c->dst_md.get_size());
      temps.push_back(tb);
      dnnl::memory t(c->dst_md, engine(), ptr(tb));
      std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, c->weights}, {DNNL_ARG_DST, t}};
      if (c->bias) args.emplace(DNNL_ARG_BIAS, *c->bias);
      step(c->prim, std::move(args));
      const Shape& ws = k.specs_.at(&n - k.body_.data())->weights.shape();
      const std::int64_t N = x.shape[0], H = x.shape[2], W = x.shape[3], co = ws[1], kh = ws[2], kw = ws[3];
      const Shape out{N, co, H * kh, W * kw};
      const dims view{N, co, kh, kw, H, W};
      const dnnl::memory::desc from(view, dt::f32, dims{kh * kw * co * H * W, H * W, kw * co * H * W, co * H * W, W, 1});
      const dnnl::memory::desc to(view, dt::f32, dims{co * H * kh * W * kw, H * kh * W * kw, W * kw, 1, kh * W * kw, kw});
      Val& y = define(n.outputs[0], plain_desc(out), out);
      dnnl::memory t6(from, engine(), ptr(tb)), y6(to, engine(), y.mem.get_data_handle());
      step(dnnl::reorder(t6, y6), {{DNNL_ARG_FROM, t6}, {DNNL_ARG_TO, y6}});
      return true;
    }

    bool unary(std::size_t i, const Node& n, std::vector<int>& taken) {
      using dnnl::algorithm;
      const std::string& op = n.op_type;
      const Val& x = vals.at(n.inputs[0]);
      algorithm alg;
      float alpha = 0.f, beta = 0.f;
      dnnl::post_ops po;
      if (op == "Relu") alg = algorithm::eltwise_relu;
      else if (op == "LeakyRelu") alg = algorithm::eltwise_relu, alpha = n.attr_float("alpha", 0.01f);
      else if (op == "Sigmoid") alg = algorithm::eltwise_logistic;
      else if (op == "Tanh") alg = algorithm::eltwise_tanh;
      else if (op == "HardSwish") alg = algorithm::eltwise_hardswish;
      else if (op == "HardSigmoid") {
        alg = algorithm::eltwise_linear, alpha = n.attr_float("alpha", 0.2f), beta = n.attr_float("beta", 0.5f);
        po.append_eltwise(1.f, algorithm::eltwise_clip_v2, 0.f, 1.f);
      } else if (op == "Clip") {
        alg = algorithm::eltwise_clip_v2;
        alpha = n.attr_float("min", -INFINITY);
        beta = n.attr_float("max", INFINITY);
        for (int b = 1; b <= 2; ++b) {
          if (!n.has_input(b)) continue;
          const Tensor& c = k.constants_.at(n.inputs[b]);
          if (c.numel() != 1 || c.dtype() != DType::kF32) return false;
          (b == 1 ? alpha : beta) = static_cast<float>(c.get_as_double(0));
        }
      } else {
        return false;
      }
      const dnnl::memory::desc md = x.mem.get_desc();
      dnnl::primitive_attr attr;
      attr.set_post_ops(po);
      dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_inference, alg, md, alpha, beta);
      dnnl::eltwise_forward::primitive_desc pd(d, attr, engine());
      const dnnl::memory src = x.mem;
      int out_buf = -2;
      if (can_reuse(n.inputs[0], i, md)) out_buf = x.buffer, taken.push_back(out_buf);
      Val& y = define(n.outputs[0], md, x.shape, out_buf);
      step(dnnl::eltwise_forward(pd), {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, y.mem}});
      return true;
    }

    bool binary(std::size_t i, const Node& n, std::vector<int>& temps, std::vector<int>& taken) {
      using dnnl::algorithm;
      const std::string& op = n.op_type;
      const algorithm alg = op == "Add" ? algorithm::binary_add : op == "Sub" ? algorithm::binary_sub
                            : op == "Mul" ? algorithm::binary_mul : algorithm::binary_div;
      std::string a_name = n.inputs[0], b_name = n.inputs[1];
      const Shape out = broadcast_shapes(vals.at(a_name).shape, vals.at(b_name).shape);
      if (out.empty() || out.size() > 6 || shape_numel(out) == 0) return false;
      if (vals.at(a_name).shape != out) {
        if ((op != "Add" && op != "Mul") || vals.at(b_name).shape != out) return false;
        std::swap(a_name, b_name);
      }
      const Val& a = vals.at(a_name);
      const Val& b = vals.at(b_name);
      const dnnl::memory::desc a_md = a.mem.get_desc();
      dnnl::memory b_mem;
      if (b.shape == out) {
        b_mem = as(b, a_md, temps);
      } else if (b.shape.size() == out.size()) {
        b_mem = b.mem;
      } else if (b.buffer < 0 && k.constants_.count(b_name)) {
        Shape ext = b.shape;
        ext.insert(ext.begin(), out.size() - ext.size(), 1);
        b_mem = dnnl::memory(plain_desc(ext), engine(), b.mem.get_data_handle());
      } else {
        return false;
      }
      std::optional<dnnl::binary::primitive_desc> pd;
      try {
        pd.emplace(dnnl::binary::desc(alg, a_md, b_mem.get_desc(), a_md), engine());
      } catch (const dnnl::error&) {
        if (b.shape == out || b.plain) return false;
        b_mem = as(b, plain_desc(b.shape), temps);  // a broadcast operand in a layout binary rejects
        pd.emplace(dnnl::binary::desc(alg, a_md, b_mem.get_desc(), a_md), engine());
      }
      int out_buf = -2;
      if (can_reuse(a_name, i, a_md)) out_buf = a.buffer, taken.push_back(out_buf);
      const dnnl::memory a_mem = a.mem;
      Val& y = define(n.outputs[0], a_md, out, out_buf);
      step(dnnl::binary(*pd), {{DNNL_ARG_SRC_0, a_mem}, {DNNL_ARG_SRC_1, b_mem}, {DNNL_ARG_DST, y.mem}});
      return true;
    }
  };

  // The plan's steps one at a time, each waited for and its time added to its body node's (what
  // the executor's profile reports for a region: where inside it the time goes).
  static void run_timed(const Plan& plan, std::vector<double>& body_ms) {
    for (std::size_t s = 0; s < plan.steps.size(); ++s) {
      const auto start = std::chrono::steady_clock::now();
      plan.steps[s].execute();
      stream().wait();
      const std::chrono::duration<double, std::milli> ms = std::chrono::steady_clock::now() - start;
      if (plan.step_node[s] < body_ms.size()) body_ms[plan.step_node[s]] += ms.count();
    }
  }

  // The body node by node, on the ordinary kernels.
  void run_nodes(KernelContext& ctx) {
    std::map<std::string, Tensor> values;
    for (std::size_t i = 0; i < inputs_.size(); ++i) values[inputs_[i]] = ctx.inputs[i];
    std::vector<Tensor> in_buf, out_buf;
    for (std::size_t k = 0; k < body_.size(); ++k) {
      const Node& n = body_[k];
      in_buf.clear();
      for (const auto& in : n.inputs) in_buf.push_back(in.empty() ? Tensor() : values.at(in));
      out_buf.assign(n.outputs.size(), Tensor());
      KernelContext c{in_buf, out_buf, n};
      const auto start = std::chrono::steady_clock::now();
      try {
        fallback_[k]->run(c);
      } catch (const Error& e) {
        const std::string msg = e.what();
        if (msg.find(n.where()) != std::string::npos) throw;
        throw InvalidArgument(n.where() + ": " + msg);
      }
      if (ctx.body_ms != nullptr && k < ctx.body_ms->size()) {
        (*ctx.body_ms)[k] += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      }
      for (std::size_t o = 0; o < n.outputs.size(); ++o) {
        if (!n.outputs[o].empty()) values[n.outputs[o]] = std::move(out_buf[o]);
      }
    }
    for (std::size_t o = 0; o < outputs_.size(); ++o) ctx.outputs[o] = values.at(outputs_[o]);
  }

  std::vector<Node> body_;
  std::vector<std::string> inputs_, outputs_;
  std::map<std::string, Tensor> constants_;
  std::map<std::string, DType> dtypes_;
  std::vector<std::unique_ptr<Kernel>> fallback_;
  std::vector<std::optional<ConvSpec>> specs_;
  std::vector<std::optional<ConvSpec>> pointwise_;  // ConvTranspose run as a 1x1 Conv
  std::vector<std::optional<PoolSpec>> pools_;
  std::map<std::vector<Shape>, std::unique_ptr<Plan>> plans_;
  std::vector<Tensor> run_inputs_;
  std::vector<Shape> run_key_;
};

}  // namespace

RW_REGISTER_PROVIDER_KERNEL(kRegionOp, Device::kCpu, kProvider, kPriority, make_onednn_factory<RegionKernel>());

}  // namespace redwood::cpu::onednn
