// The CPU's profile. Each figure is taken the way Redwood's CPU path would see it:
//
//   peak_gflops  a square matmul through oneDNN, the CPU backend's library, with the weights in the
//                layout oneDNN prefers (as the backend reorders constant weights once at load): what
//                Redwood's dense kernels reach here, not a synthetic FMA loop's ceiling. fp32
//                always; bf16 and fp16 only where the CPU computes them natively (avx512_bf16 /
//                amx_bf16, avx512_fp16 / amx_fp16) and oneDNN has an optimized kernel for them.
//                The size grows until one product takes 10 ms, so a large machine is measured
//                busy; the figure is the median of five.
//   memory_gbps  large memcpy split over oneTBB's threads, buffers well beyond the last-level
//                cache; bytes read plus bytes written per second, the median of five.
//   launch_ms    the marginal cost of one more node in the CPU Executor: a chain of tiny Tanh
//                nodes (oneDNN eltwise) against a single one, so the executor's per-node
//                bookkeeping and the provider's dispatch are counted and the per-run overhead is
//                not. oneDNN wakes its OpenMP team on every call, so the figure depends on
//                OpenMP's wait policy (spinning threads answer at once; the passive ones the
//                launcher asks for sleep, and waking them dominates), which is part of the key.
//                Without CPU kernels linked (no backend_cpu), an empty oneTBB parallel_for: the
//                floor under any parallel kernel.

#include "runtime/cpu_profile.hpp"

#include "core/error.hpp"
#include "runtime/executor.hpp"
#include "core/log.hpp"
#include "runtime/median_time.hpp"

#include <fmt/format.h>
#include <oneapi/dnnl/dnnl.hpp>
#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/info.h>
#include <oneapi/tbb/parallel_for.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <vector>

namespace redwood::runtime {
namespace {

struct CpuInfo {
  std::string name;
  std::set<std::string> flags;  // all of them
  std::string isa;              // the ones that matter to kernels, in a fixed order
};

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  const auto e = s.find_last_not_of(" \t");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

const CpuInfo& cpu_info() {
  static const CpuInfo info = [] {
    CpuInfo ci;
    std::ifstream in("/proc/cpuinfo");
    std::string line, flags;
    // x86 has "model name" and "flags"; Arm has "Features" and often no model name.
    while (std::getline(in, line) && (ci.name.empty() || flags.empty())) {
      const auto colon = line.find(':');
      if (colon == std::string::npos) continue;
      const std::string field = trim(line.substr(0, colon));
      if (ci.name.empty() && field == "model name") ci.name = trim(line.substr(colon + 1));
      if (flags.empty() && (field == "flags" || field == "Features")) flags = line.substr(colon + 1);
    }
    if (ci.name.empty()) {
      utsname u{};
      ci.name = fmt::format("unknown {} CPU", uname(&u) == 0 ? u.machine : "");
    }
    std::istringstream words(flags);
    for (std::string w; words >> w;) ci.flags.insert(w);
    static const char* const kIsa[] = {"sse4_2", "avx", "avx2", "fma", "avx_vnni", "avx512f", "avx512bw",
                                       "avx512vl", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile",
                                       "amx_bf16", "amx_int8", "amx_fp16", "asimd", "asimdhp", "sve", "sve2",
                                       "bf16", "i8mm"};
    for (const char* f : kIsa) {
      if (ci.flags.count(f) != 0) ci.isa += (ci.isa.empty() ? "" : " ") + std::string(f);
    }
    return ci;
  }();
  return info;
}

bool has_any(const CpuInfo& ci, std::initializer_list<const char*> flags) {
  return std::any_of(flags.begin(), flags.end(), [&](const char* f) { return ci.flags.count(f) != 0; });
}

/// CPU seconds: all processes' busy time (from /proc/stat, steal included: in a VM, time the
/// host gave to others), and this process's own.
struct CpuSeconds {
  double all = 0, ours = 0;
};

CpuSeconds cpu_seconds() {
  CpuSeconds s;
  std::ifstream stat("/proc/stat");
  std::string cpu;
  unsigned long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  if (stat >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal && cpu == "cpu") {
    s.all = static_cast<double>(user + nice + system + irq + softirq + steal) / static_cast<double>(sysconf(_SC_CLK_TCK));
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  s.ours = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
  return s;
}

struct MatmulFigure {
  double gflops = 0;
  std::int64_t n = 0;
};

/// One n×n×n matmul through oneDNN (src and weights of `type`, fp32 dst), n doubled until a product
/// takes min_ms; gflops 0 when oneDNN has only its reference kernel for `type`.
MatmulFigure matmul_gflops(dnnl::memory::data_type type, bool quick) {
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  const double min_ms = quick ? 2 : 10;
  const int reps = quick ? 3 : 5;
  const std::int64_t max_n = quick ? 1024 : 4096;
  for (std::int64_t n = quick ? 256 : 512;; n *= 2) {
    const dnnl::memory::desc a_md({n, n}, type, tag::ab), b_md({n, n}, type, tag::any), c_md({n, n}, dt::f32, tag::ab);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), engine);
    if (std::string(pd.impl_info_str()).rfind("ref", 0) == 0) return {};
    dnnl::memory a(pd.src_desc(), engine), b(pd.weights_desc(), engine), c(pd.dst_desc(), engine);
    // Every element the same (2^-7), so any layout oneDNN chose holds the same matrix; the sums stay
    // small and normal in every precision.
    for (dnnl::memory* m : {&a, &b}) {
      const std::size_t bytes = m->get_desc().get_size();
      if (type == dt::f32) std::fill_n(static_cast<float*>(m->get_data_handle()), bytes / 4, 1.0f / 128);
      else std::fill_n(static_cast<std::uint16_t*>(m->get_data_handle()), bytes / 2,
                       type == dt::bf16 ? std::uint16_t{0x3C00} : std::uint16_t{0x2000});
    }
    const dnnl::matmul prim(pd);
    auto run = [&] {
      prim.execute(stream, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}});
      stream.wait();
    };
    run();  // the first run pays for the JIT and first touches
    if (median_ms(1, run) < min_ms && n < max_n) continue;
    const double ms = median_ms(reps, run);
    return {2.0 * static_cast<double>(n) * n * n / (ms * 1e6), n};
  }
}

/// Bytes read plus written per second by memcpy over oneTBB's threads, buffers of `bytes` each.
double copy_gbps(std::size_t bytes, int reps) {
  const int threads = oneapi::tbb::info::default_concurrency();
  const std::size_t chunk = (bytes / threads + 4095) / 4096 * 4096;
  bytes = chunk * threads;
  // Uninitialized, then first touched by the threads that copy them (pages land on their nodes).
  auto src = std::make_unique_for_overwrite<char[]>(bytes);
  auto dst = std::make_unique_for_overwrite<char[]>(bytes);
  auto each_chunk = [&](auto&& fn) {
    oneapi::tbb::parallel_for(
        oneapi::tbb::blocked_range<int>(0, threads, 1),
        [&](const oneapi::tbb::blocked_range<int>& r) {
          for (int i = r.begin(); i != r.end(); ++i) fn(static_cast<std::size_t>(i) * chunk);
        },
        oneapi::tbb::static_partitioner());
  };
  each_chunk([&](std::size_t at) {
    std::memset(src.get() + at, 1, chunk);
    std::memset(dst.get() + at, 0, chunk);
  });
  auto copy = [&] { each_chunk([&](std::size_t at) { std::memcpy(dst.get() + at, src.get() + at, chunk); }); };
  copy();
  const double ms = median_ms(reps, copy);
  return 2.0 * static_cast<double>(bytes) / (ms * 1e6);
}


struct Dispatch {
  double ms = 0;
  std::string how;
};

Dispatch dispatch_ms(bool quick) {
  constexpr int kNodes = 33;
  // Each timed batch of runs lasts about this long, whatever a node costs.
  const double batch_ms = quick ? 1 : 5;
  const int reps = quick ? 3 : 7;
  try {
    ExecutorOptions options;
    options.optimize = false;  // the optimizer would fuse the chain into one node
    Executor one(tanh_chain(1), options), chain(tanh_chain(kNodes), options);
    const std::map<std::string, Tensor> inputs{{"x", Tensor::zeros(DType::kF32, {1, 64})}};
    auto per_run = [&](Executor& e) {
      for (int i = 0; i < 2; ++i) e.run(inputs);  // plans the workspace, warms oneDNN
      const int runs = std::clamp(static_cast<int>(batch_ms / median_ms(1, [&] { e.run(inputs); })), 1, 100);
      return median_ms(reps, [&] {
               for (int i = 0; i < runs; ++i) e.run(inputs);
             }) / runs;
    };
    const double t_one = per_run(one), t_chain = per_run(chain);
    // The difference is the nodes' own cost; on a noisy machine it could come out at or below
    // zero, and then the chain's average per node is the better bound.
    const double marginal = (t_chain - t_one) / (kNodes - 1);
    return {marginal > 0 ? marginal : t_chain / kNodes,
            fmt::format("one more node in the CPU Executor ({} provider, tiny Tanh)", chain.node_providers().back())};
  } catch (const Unsupported& e) {
    log().warn("device profile: no CPU kernel for the dispatch measurement ({}); launch_ms is an empty "
               "oneTBB parallel_for's", e.what());
  }
  const int threads = oneapi::tbb::info::default_concurrency(), runs = 100;
  const double ms = median_ms(reps, [&] {
    for (int i = 0; i < runs; ++i) oneapi::tbb::parallel_for(0, threads, [](int) {});
  });
  return {ms / runs, "an empty oneTBB parallel_for (no CPU kernels linked)"};
}

}  // namespace

std::shared_ptr<Graph> tanh_chain(int nodes) {
  auto g = std::make_shared<Graph>();
  g->name = "dispatch_probe";
  g->opset = 17;
  const std::vector<Dim> dims{Dim{1, ""}, Dim{64, ""}};
  g->inputs.push_back(ValueInfo{"x", DType::kF32, 0, true, dims});
  std::string previous = "x";
  for (int i = 0; i < nodes; ++i) {
    Node n;
    n.name = fmt::format("tanh{}", i);
    n.op_type = "Tanh";
    n.inputs = {previous};
    previous = i + 1 == nodes ? "y" : fmt::format("v{}", i);
    n.outputs = {previous};
    g->nodes.push_back(std::move(n));
  }
  g->outputs.push_back(ValueInfo{"y", DType::kF32, 0, true, dims});
  return g;
}

std::string cpu_profile_key() {
  const CpuInfo& ci = cpu_info();
  const dnnl_version_t* v = dnnl_version();
  // OpenMP's wait policy decides what waking oneDNN's threads costs, so launch_ms (the launcher
  // sets PASSIVE; apps/redwood/main.cpp).
  const char* wait = std::getenv("OMP_WAIT_POLICY");
  return fmt::format("cpu {}; {} threads; {}; oneDNN {}.{}.{}; OMP_WAIT_POLICY {}", ci.name,
                     oneapi::tbb::info::default_concurrency(), ci.isa, v->major, v->minor, v->patch,
                     wait != nullptr ? wait : "unset");
}

std::size_t past_last_level_cache(std::size_t most) {
  const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  const std::size_t mib = std::size_t{1} << 20;
  return std::clamp<std::size_t>(2 * static_cast<std::size_t>(std::max(l3, 0L)), 32 * mib, std::max(most, 32 * mib));
}

DeviceProfile measure_cpu_profile(bool quick) {
  using dt = dnnl::memory::data_type;
  const CpuInfo& ci = cpu_info();
  const CpuSeconds cpu_before = cpu_seconds();
  const auto start = std::chrono::steady_clock::now();
  DeviceProfile p;
  p.name = ci.name;
  p.isa = ci.isa;
  p.cores = oneapi::tbb::info::default_concurrency();

  std::string sizes;
  auto peak = [&](const char* precision, dt type) {
    try {
      const MatmulFigure f = matmul_gflops(type, quick);
      if (f.gflops <= 0) {
        log().debug("device profile: oneDNN has only a reference {} matmul here; {} left out", precision, precision);
        return;
      }
      p.peak_gflops[precision] = f.gflops;
      sizes += fmt::format("{}{} {}^3", sizes.empty() ? "" : ", ", precision, f.n);
    } catch (const dnnl::error& e) {
      // fp32 always has a kernel; a native bf16/fp16 flag without oneDNN support for it is left out.
      RW_EXPECTS(type != dt::f32, Error, "device profile: oneDNN cannot build an fp32 matmul: {}", e.what());
      log().debug("device profile: no oneDNN {} matmul here ({}); {} left out", precision, e.what(), precision);
    }
  };
  auto phase = [&, last = std::chrono::steady_clock::now()](const char* what) mutable {
    const auto now = std::chrono::steady_clock::now();
    log().debug("device profile: cpu {} took {:.0f} ms", what, std::chrono::duration<double, std::milli>(now - last).count());
    last = now;
  };
  // Memory first: once oneDNN has run, its OpenMP threads may spin (OMP_WAIT_POLICY=ACTIVE) on
  // the cores the copies need. Beyond the last-level cache, at most 128 MiB.
  const std::size_t mib = std::size_t{1} << 20;
  const std::size_t bytes = quick ? 16 * mib : past_last_level_cache(128 * mib);
  p.memory_gbps = copy_gbps(bytes, quick ? 3 : 5);
  phase("memcpy");

  peak("fp32", dt::f32);
  phase("fp32 matmul");
  if (has_any(ci, {"avx512_bf16", "amx_bf16"})) peak("bf16", dt::bf16);
  if (has_any(ci, {"avx512_fp16", "amx_fp16"})) peak("fp16", dt::f16);
  phase("bf16/fp16 matmuls");

  const Dispatch d = dispatch_ms(quick);
  phase("dispatch");
  p.launch_ms = d.ms;
  p.peak_method = fmt::format("oneDNN matmul ({}); memory: {} MiB memcpy over {} oneTBB threads; launch: {}",
                              sizes, bytes / mib, p.cores, d.how);

  // A busy machine (a build, another pipeline) gives low figures: say how busy it was.
  const CpuSeconds cpu_after = cpu_seconds();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double others = (cpu_after.all - cpu_before.all) - (cpu_after.ours - cpu_before.ours);
  p.others_cpu_share = std::max(0.0, others / (wall * static_cast<double>(sysconf(_SC_NPROCESSORS_ONLN))));
  return p;
}

}  // namespace redwood::runtime
