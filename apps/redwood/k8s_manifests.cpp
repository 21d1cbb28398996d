// Kubernetes manifests for a pipeline file; the choices (why a StatefulSet, what the pods may do,
// what a scale event does to the shards) are argued in docs/deploy.md.

#include "apps/redwood/k8s_manifests.hpp"

#include "core/error.hpp"
#include "pipelines/shard.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>

namespace redwood::app {

namespace {

// A scalar that must stay a string where YAML would read a number or a boolean (an env value
// "3", a quantity "2"): tagged here, written double-quoted by emit(), the tag itself not written.
const char* const kQuoted = "!redwood-quoted";

YAML::Node quoted(const std::string& value) {
  YAML::Node n(value);
  n.SetTag(kQuoted);
  return n;
}

// Writes `node` with yaml-cpp's emitter: maps and lists in block style, in insertion order (so
// the output is the same bytes for the same input), multi-line strings as literal blocks.
void emit(YAML::Emitter& out, const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      if (node.size() == 0) {  // `{}` on the key's line
        out << YAML::Flow << YAML::BeginMap << YAML::EndMap;
        break;
      }
      out << YAML::BeginMap;
      for (const auto& kv : node) {
        out << YAML::Key << kv.first.as<std::string>() << YAML::Value;
        emit(out, kv.second);
      }
      out << YAML::EndMap;
      break;
    case YAML::NodeType::Sequence:
      out << YAML::BeginSeq;
      for (const auto& item : node) emit(out, item);
      out << YAML::EndSeq;
      break;
    case YAML::NodeType::Scalar: {
      const std::string& s = node.Scalar();
      if (s.find('\n') != std::string::npos) out << YAML::Literal << s;
      else if (node.Tag() == kQuoted) out << YAML::DoubleQuoted << s;
      else out << s;
      break;
    }
    default:
      out << YAML::Null;
  }
}

std::string document(const YAML::Node& node, const std::string& header) {
  YAML::Emitter out;
  out.SetIndent(2);
  out.SetSeqFormat(YAML::Block);
  out.SetMapFormat(YAML::Block);
  emit(out, node);
  RW_EXPECTS(out.good(), Error, "writing YAML: {}", out.GetLastError());
  return header + out.c_str() + "\n";
}

// An object's apiVersion, kind and metadata (name, namespace, the labels every object carries).
YAML::Node object(const char* api_version, const char* kind, const std::string& name, const K8sInput& input,
                  const K8sOptions& options) {
  YAML::Node m;
  m["name"] = name;
  if (!options.ns.empty()) m["namespace"] = options.ns;
  m["labels"]["app.kubernetes.io/name"] = "redwood";
  m["labels"]["app.kubernetes.io/instance"] = input.pipeline_name;
  m["labels"]["app.kubernetes.io/managed-by"] = "redwood-deploy";
  YAML::Node o;
  o["apiVersion"] = api_version;
  o["kind"] = kind;
  o["metadata"] = m;
  return o;
}

YAML::Node selector_labels(const K8sInput& input) {
  YAML::Node s;
  s["app.kubernetes.io/name"] = "redwood";
  s["app.kubernetes.io/instance"] = input.pipeline_name;
  return s;
}

// ConfigMap keys may not hold '/': a file's relative path with '/' as "__".
std::string config_key(const std::string& relative) {
  std::string key;
  for (char c : relative) key += c == '/' ? std::string("__") : std::string(1, c);
  return key;
}

YAML::Node config_map(const std::string& name, const K8sInput& input, const K8sOptions& options) {
  YAML::Node cm = object("v1", "ConfigMap", name + "-config", input, options);
  cm["data"]["pipeline.yaml"] = input.pipeline_text;
  for (const auto& f : input.files) cm["data"][config_key(f.relative)] = f.text;
  return cm;
}

YAML::Node service(const std::string& name, const K8sInput& input, const K8sOptions& options) {
  YAML::Node s = object("v1", "Service", name, input, options);
  s["spec"]["clusterIP"] = "None";  // headless: one DNS name per pod, <pod>.<service>
  // Every pod's address, ready or not: the workers count themselves by these addresses
  // (REDWOOD_PEERS), and a pod still loading its models owns its shard all the same.
  s["spec"]["publishNotReadyAddresses"] = true;
  s["spec"]["selector"] = selector_labels(input);
  YAML::Node port;
  port["name"] = "metrics";
  port["port"] = input.metrics_port;
  port["targetPort"] = "metrics";
  port["protocol"] = "TCP";
  s["spec"]["ports"].push_back(port);
  return s;
}

YAML::Node probe(const std::string& path, int period_s, int failures) {
  YAML::Node p;
  p["httpGet"]["path"] = path;
  p["httpGet"]["port"] = "metrics";
  p["periodSeconds"] = period_s;
  p["timeoutSeconds"] = 2;
  p["failureThreshold"] = failures;
  return p;
}

YAML::Node volume_mount(const char* name, const char* path, bool read_only) {
  YAML::Node m;
  m["name"] = name;
  m["mountPath"] = path;
  if (read_only) m["readOnly"] = true;
  return m;
}

YAML::Node stateful_set(const std::string& name, const K8sInput& input, const K8sOptions& options) {
  YAML::Node c;
  c["name"] = "redwood";
  c["image"] = options.image;
  // The metrics endpoint must answer the kubelet's probes and Prometheus from outside the pod:
  // the file's address (loopback in the shipped configs, as is right on a workstation) is
  // overridden here rather than asking every file to be edited for the cluster.
  for (const char* arg : {"redwood", "run", "/config/pipeline.yaml", "--shard", "statefulset", "--set",
                          "service.metrics.address=0.0.0.0"}) {
    c["command"].push_back(quoted(arg));
  }
  for (const auto& set : input.sets) {
    c["command"].push_back(quoted("--set"));
    c["command"].push_back(quoted(set));
  }
  YAML::Node pod_name;
  pod_name["name"] = "POD_NAME";
  pod_name["valueFrom"]["fieldRef"]["fieldPath"] = "metadata.name";
  c["env"].push_back(pod_name);
  // The worker count: the addresses of the headless Service, counted at start and every 10 s
  // (pipelines/peer_count.hpp), so that the pods follow what KEDA or `kubectl scale` makes of
  // spec.replicas. The short name resolves through the pod's DNS search path, in its namespace.
  YAML::Node peers;
  peers["name"] = "REDWOOD_PEERS";
  peers["value"] = name;
  c["env"].push_back(peers);
  // The root filesystem is read-only: the plan cache (core/cache_dir.cpp) goes to /tmp's emptyDir.
  YAML::Node cache;
  cache["name"] = "REDWOOD_CACHE_DIR";
  cache["value"] = "/tmp/redwood-cache";
  c["env"].push_back(cache);
  YAML::Node port;
  port["name"] = "metrics";
  port["containerPort"] = input.metrics_port;
  port["protocol"] = "TCP";
  c["ports"].push_back(port);
  c["resources"]["requests"]["cpu"] = quoted(options.cpu_request);
  c["resources"]["requests"]["memory"] = quoted(options.memory_request);
  c["resources"]["limits"]["memory"] = quoted(options.memory_limit);
  if (options.gpus_per_pod > 0) c["resources"]["limits"]["nvidia.com/gpu"] = options.gpus_per_pod;
  // /healthz answers from before the models load; /readyz once the pipeline runs (docs/operations.md).
  c["readinessProbe"] = probe("/readyz", 5, 3);
  c["livenessProbe"] = probe("/healthz", 10, 3);
  c["securityContext"]["runAsNonRoot"] = true;
  c["securityContext"]["runAsUser"] = kRedwoodUid;
  c["securityContext"]["runAsGroup"] = kRedwoodUid;
  c["securityContext"]["readOnlyRootFilesystem"] = true;
  c["securityContext"]["allowPrivilegeEscalation"] = false;
  c["securityContext"]["capabilities"]["drop"].push_back("ALL");
  c["volumeMounts"].push_back(volume_mount("config", "/config", true));
  c["volumeMounts"].push_back(volume_mount("tmp", "/tmp", false));
  if (!options.assets_claim.empty()) c["volumeMounts"].push_back(volume_mount("assets", "/assets", true));

  YAML::Node pod;
  pod["metadata"]["labels"] = selector_labels(input);
  pod["spec"]["securityContext"]["runAsNonRoot"] = true;
  pod["spec"]["securityContext"]["runAsUser"] = kRedwoodUid;
  pod["spec"]["securityContext"]["runAsGroup"] = kRedwoodUid;
  pod["spec"]["securityContext"]["fsGroup"] = kRedwoodUid;
  pod["spec"]["securityContext"]["seccompProfile"]["type"] = "RuntimeDefault";
  // SIGTERM drains the frames in flight before the process exits (redwood run).
  pod["spec"]["terminationGracePeriodSeconds"] = 30;
  pod["spec"]["containers"].push_back(c);
  if (options.gpus_per_pod > 0) {
    // GPU nodes are commonly tainted so that only pods asking for a GPU land there.
    YAML::Node t;
    t["key"] = "nvidia.com/gpu";
    t["operator"] = "Exists";
    t["effect"] = "NoSchedule";
    pod["spec"]["tolerations"].push_back(t);
  }
  YAML::Node config_volume;
  config_volume["name"] = "config";
  config_volume["configMap"]["name"] = name + "-config";
  YAML::Node item;
  item["key"] = "pipeline.yaml";
  item["path"] = "pipeline.yaml";
  config_volume["configMap"]["items"].push_back(item);
  for (const auto& f : input.files) {
    YAML::Node i;
    i["key"] = config_key(f.relative);
    i["path"] = f.relative;
    config_volume["configMap"]["items"].push_back(i);
  }
  pod["spec"]["volumes"].push_back(config_volume);
  YAML::Node tmp_volume;
  tmp_volume["name"] = "tmp";
  tmp_volume["emptyDir"] = YAML::Node(YAML::NodeType::Map);
  pod["spec"]["volumes"].push_back(tmp_volume);
  if (!options.assets_claim.empty()) {
    YAML::Node assets_volume;
    assets_volume["name"] = "assets";
    assets_volume["persistentVolumeClaim"]["claimName"] = options.assets_claim;
    assets_volume["persistentVolumeClaim"]["readOnly"] = true;
    pod["spec"]["volumes"].push_back(assets_volume);
  }

  YAML::Node s = object("apps/v1", "StatefulSet", name, input, options);
  s["spec"]["serviceName"] = name;
  s["spec"]["replicas"] = options.replicas;
  // Workers share nothing at start: all start (and on scaling, come and go) at once rather than
  // one after another; each finds the others by counting the Service's addresses.
  s["spec"]["podManagementPolicy"] = "Parallel";
  s["spec"]["selector"]["matchLabels"] = selector_labels(input);
  s["spec"]["template"] = pod;
  return s;
}

YAML::Node scaled_object(const std::string& name, const K8sInput& input, const K8sOptions& options) {
  YAML::Node o = object("keda.sh/v1alpha1", "ScaledObject", name, input, options);
  o["spec"]["scaleTargetRef"]["apiVersion"] = "apps/v1";
  o["spec"]["scaleTargetRef"]["kind"] = "StatefulSet";
  o["spec"]["scaleTargetRef"]["name"] = name;
  const ReplicaBounds bounds = replica_bounds(options);
  o["spec"]["minReplicaCount"] = bounds.min;
  o["spec"]["maxReplicaCount"] = bounds.max;
  o["spec"]["pollingInterval"] = 30;
  o["spec"]["cooldownPeriod"] = 300;
  YAML::Node trigger;
  trigger["type"] = "prometheus";
  trigger["metadata"]["serverAddress"] = options.prometheus;
  trigger["metadata"]["query"] =
      options.scale_query.empty() ? default_scale_query(input.pipeline_name) : options.scale_query;
  trigger["metadata"]["threshold"] = quoted(options.scale_threshold);
  o["spec"]["triggers"].push_back(trigger);
  return o;
}

}  // namespace

std::string k8s_object_name(const std::string& pipeline_name) {
  const std::string name = "redwood-" + pipeline_name;
  const bool ok = !pipeline_name.empty() && name.size() <= 52 &&
                  std::all_of(pipeline_name.begin(), pipeline_name.end(),
                              [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; }) &&
                  pipeline_name.back() != '-';
  RW_EXPECTS(ok, InvalidArgument,
             "pipeline name '{}' cannot name Kubernetes objects: '{}' must be lower-case letters, digits and '-', "
             "ending in a letter or digit, at most 52 characters",
             pipeline_name, name);
  return name;
}

ReplicaBounds replica_bounds(const K8sOptions& options) {
  const int min = options.min_replicas > 0 ? options.min_replicas : options.replicas;
  const int max = options.max_replicas > 0 ? options.max_replicas : std::min(2 * options.replicas, kMaxShards);
  return {min, max};
}

std::string default_scale_query(const std::string& pipeline_name) {
  // Frames a live stream dropped because the pipeline did not keep up: the one metric that says
  // "more workers needed" rather than "busy".
  return fmt::format("sum(rate(redwood_stream_frames_dropped_total{{pipeline=\"{}\"}}[1m]))", pipeline_name);
}

std::vector<Manifest> make_k8s_manifests(const K8sInput& input, const K8sOptions& options) {
  const std::string name = k8s_object_name(input.pipeline_name);
  const std::string header = fmt::format("# Written by `redwood deploy k8s` from {} (docs/deploy.md).\n", input.source);
  std::string pod_header = header;
  if (!input.pod_files.empty()) {
    pod_header += "# The pods read these files, which the image or the assets volume must provide:\n";
    for (const auto& f : input.pod_files) pod_header += "#   " + f + "\n";
  }
  return {{"configmap.yaml", document(config_map(name, input, options), header)},
          {"service.yaml", document(service(name, input, options), header)},
          {"statefulset.yaml", document(stateful_set(name, input, options), pod_header)},
          {"scaledobject.yaml", document(scaled_object(name, input, options), header)}};
}

}  // namespace redwood::app
