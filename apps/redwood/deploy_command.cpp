// redwood deploy k8s CONFIG --replicas N: Kubernetes manifests for a pipeline file (a StatefulSet
// of workers that shard the streams among them and re-shard as their number changes, its
// headless Service, a ConfigMap with the file, a KEDA ScaledObject between --min-replicas and
// --max-replicas; apps/redwood/k8s_manifests.hpp). The file is first built as `redwood run`
// builds it (models loaded, sources opened, sinks set up), without running, so a file that would
// fail in the pods fails here with the same message; --parse-only skips the build on a machine
// without the models. docs/deploy.md has the commands around it.
//
//   redwood deploy k8s configs/ocr-video.yaml --replicas 3 --out deploy/ocr-video
//   redwood deploy k8s configs/detect.yaml --replicas 4 --gpus-per-pod 0 | kubectl apply -f -

#include "apps/redwood/commands.hpp"
#include "apps/redwood/k8s_manifests.hpp"
#include "core/error.hpp"
#include "pipelines/metrics.hpp"
#include "pipelines/pipeline.hpp"
#include "pipelines/shard.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace redwood::app {

namespace {

namespace fs = std::filesystem;

// A referenced file larger than this, or with a NUL byte, is not put in the ConfigMap (whose
// objects etcd caps at 1 MiB in all): labels and dictionaries are a few KiB, models are not text.
constexpr std::uintmax_t kMaxConfigFileBytes = 256 * 1024;

struct DeployArgs {
  std::string config;
  std::vector<std::string> sets;
  std::string out;
  bool parse_only = false;
  K8sOptions k8s;
};

std::string read_text(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  RW_EXPECTS(in.good(), IoError, "cannot read '{}'", file.string());
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool is_small_text(const fs::path& file) {
  std::error_code ec;
  const auto size = fs::file_size(file, ec);
  if (ec || size > kMaxConfigFileBytes) return false;
  return read_text(file).find('\0') == std::string::npos;
}

// Every value of the file that names an existing file relative to the file's folder (the models'
// `path`, a `dictionary`, `labels`...), or an absolute path that exists: found by what they name
// rather than by key, so a new stage's key needs no change here. Sinks are skipped: their paths
// are outputs.
void collect_files(const YAML::Node& node, const ConfigOrigin& origin, std::set<std::string>& seen,
                   K8sInput& input) {
  if (node.IsMap()) {
    for (const auto& kv : node) {
      // What sinks write (a JSON Lines path) is output, not something the pods must be given.
      if (kv.first.Scalar() == "sinks") continue;
      collect_files(kv.second, origin, seen, input);
    }
    return;
  }
  if (node.IsSequence()) {
    for (const auto& item : node) collect_files(item, origin, seen, input);
    return;
  }
  if (!node.IsScalar()) return;
  const std::string value = node.Scalar();
  if (value.empty() || value.find("://") != std::string::npos || value.find('\n') != std::string::npos) return;
  std::error_code ec;
  const fs::path written(value);
  const fs::path resolved = written.is_absolute() ? written : origin.resolve(value);
  if (!fs::is_regular_file(resolved, ec) || !seen.insert(resolved.lexically_normal().string()).second) return;
  if (written.is_absolute()) {
    input.pod_files.push_back(value);
    return;
  }
  const fs::path relative = resolved.lexically_normal().lexically_relative(origin.file.parent_path().lexically_normal());
  const bool inside = !relative.empty() && *relative.begin() != "..";
  if (inside && is_small_text(resolved)) {
    input.files.push_back({relative.generic_string(), read_text(resolved)});
    return;
  }
  // The ConfigMap is mounted at /config: a path written relative to the file resolves from there.
  RW_EXPECTS(!inside, InvalidArgument,
             "{}: '{}' is in the pipeline file's folder but is not a small text file (over {} KiB, or binary): the "
             "ConfigMap mounted at /config cannot carry it and would hide it; keep models and videos outside that "
             "folder (e.g. under ../assets, the assets volume; docs/deploy.md)",
             origin.where(node), value, kMaxConfigFileBytes / 1024);
  input.pod_files.push_back((fs::path("/config") / relative).lexically_normal().generic_string());
}

int deploy_k8s(DeployArgs& args) {
  K8sOptions& k = args.k8s;
  RW_EXPECTS(k.replicas >= 1 && k.replicas <= kMaxShards, InvalidArgument, "--replicas must be from 1 to {} (got {})",
             kMaxShards, k.replicas);
  RW_EXPECTS(k.gpus_per_pod >= 0, InvalidArgument, "--gpus-per-pod must be >= 0 (got {}; 0: a CPU deployment)",
             k.gpus_per_pod);
  // KEDA keeps spec.replicas between the bounds; the pods follow whatever count it sets.
  RW_EXPECTS(k.min_replicas >= 0 && k.min_replicas <= kMaxShards && k.max_replicas >= 0 && k.max_replicas <= kMaxShards,
             InvalidArgument, "--min-replicas and --max-replicas must be from 1 to {} (got {} and {})", kMaxShards,
             k.min_replicas, k.max_replicas);
  const ReplicaBounds bounds = replica_bounds(k);
  RW_EXPECTS(bounds.min <= bounds.max || k.min_replicas == 0 || k.max_replicas == 0, InvalidArgument,
             "--min-replicas {} is above --max-replicas {}", bounds.min, bounds.max);
  RW_EXPECTS(k.replicas >= bounds.min, InvalidArgument, "--replicas {} is below --min-replicas {} (KEDA's minReplicaCount)",
             k.replicas, bounds.min);
  RW_EXPECTS(k.replicas <= bounds.max, InvalidArgument, "--replicas {} is above --max-replicas {} (KEDA's maxReplicaCount)",
             k.replicas, bounds.max);

  // Checked as the pods will run it: with the same overrides and the metrics address they get.
  std::vector<std::string> sets = args.sets;
  sets.push_back("service.metrics.address=0.0.0.0");
  const PipelineFile file = load_pipeline_file(args.config, sets);
  const MetricsSettings metrics = read_metrics_settings(file);
  RW_EXPECTS(metrics.enabled, InvalidArgument,
             "{}: service.metrics is off: the pods' readiness and liveness probes and the autoscaler read the metrics "
             "endpoint; set service.metrics.port (docs/operations.md)",
             args.config);
  RW_EXPECTS(metrics.port != 0, InvalidArgument,
             "{}: service.metrics.port is 0 (any free port): the probes and the Service need a fixed port", args.config);

  K8sInput input;
  input.source = args.config;
  input.sets = args.sets;
  input.metrics_port = metrics.port;
  input.pipeline_text = read_text(args.config);
  if (args.parse_only) {
    const YAML::Node name = file.root["name"];
    input.pipeline_name = name && name.IsScalar() ? name.Scalar() : file.origin->file.stem().string();
  } else {
    const Pipeline pipeline(file);
    input.pipeline_name = pipeline.name();
  }
  std::set<std::string> seen{fs::path(args.config).lexically_normal().string()};
  collect_files(file.root, *file.origin, seen, input);
  const std::vector<Manifest> manifests = make_k8s_manifests(input, k);

  if (args.out.empty()) {
    for (const auto& m : manifests) fmt::print("---\n{}", m.yaml);
    return 0;
  }
  const fs::path dir(args.out);
  std::error_code ec;
  fs::create_directories(dir, ec);
  RW_EXPECTS(!ec, IoError, "--out: cannot create '{}': {}", dir.string(), ec.message());
  for (const auto& m : manifests) {
    const fs::path path = dir / m.file;
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << m.yaml;
    out.close();
    RW_EXPECTS(out.good(), IoError, "cannot write '{}'", path.string());
    fmt::print("wrote {}\n", path.string());
  }
  for (const auto& f : input.pod_files) fmt::print("the pods need {} (in the image or the assets volume)\n", f);
  return 0;
}

}  // namespace

Command make_deploy_command() {
  auto args = std::make_shared<DeployArgs>();
  Command c;
  c.attach_fn = [args](CLI::App& app) {
    CLI::App* deploy = app.add_subcommand("deploy", "Write deployment manifests for a pipeline file");
    deploy->require_subcommand(1);
    CLI::App* sub = deploy->add_subcommand(
        "k8s", "Kubernetes: StatefulSet of sharded workers, headless Service, ConfigMap, KEDA ScaledObject");
    K8sOptions& k = args->k8s;
    sub->add_option("config", args->config, "pipeline file (YAML; see docs/pipelines.md)")->required();
    sub->add_option("--replicas", k.replicas, "workers (StatefulSet replicas); each runs its share of the streams")
        ->required();
    sub->add_option("--gpus-per-pod", k.gpus_per_pod, "nvidia.com/gpu limit per pod (0: a CPU deployment)")
        ->default_val(1);
    sub->add_option("--image", k.image, "container image")->default_val("redwood:latest");
    sub->add_option("--namespace", k.ns, "metadata.namespace of every object (default: none, kubectl's current)");
    sub->add_option("--out", args->out, "write one file per object into this folder (default: one stream to stdout)");
    sub->add_option("--set", args->sets, "KEY.PATH=VALUE: override a value of the file, here and in the pods (repeatable)");
    sub->add_option("--cpu", k.cpu_request, "CPU request per pod")->default_val("2");
    sub->add_option("--memory", k.memory_request, "memory request per pod")->default_val("4Gi");
    sub->add_option("--memory-limit", k.memory_limit, "memory limit per pod")->default_val("8Gi");
    sub->add_option("--assets-claim", k.assets_claim,
                    "PersistentVolumeClaim with the models and videos, mounted read-only at /assets (\"\": none, the "
                    "image has them)")
        ->default_val("redwood-assets");
    sub->add_option("--min-replicas", k.min_replicas, "KEDA's minReplicaCount (default: --replicas)");
    sub->add_option("--max-replicas", k.max_replicas,
                    "KEDA's maxReplicaCount (default: twice --replicas); the pods re-shard as it scales");
    sub->add_option("--prometheus", k.prometheus, "Prometheus URL KEDA queries")
        ->default_val("http://prometheus-server.monitoring.svc:80");
    sub->add_option("--scale-query", k.scale_query,
                    "PromQL KEDA scales on (default: the pipeline's frames dropped per second)");
    sub->add_option("--scale-threshold", k.scale_threshold, "the query's target value per replica")->default_val("1");
    sub->add_flag("--parse-only", args->parse_only,
                  "only parse the file and read service.metrics (no models loaded: for a machine without them)");
    return deploy;
  };
  c.run = [args] { return deploy_k8s(*args); };
  return c;
}

}  // namespace redwood::app
