#pragma once
// Kubernetes manifests for one pipeline file (`redwood deploy k8s`, docs/deploy.md): a
// StatefulSet of sharded workers (`redwood run --shard statefulset`, counting one another
// through REDWOOD_PEERS), its headless Service, a ConfigMap with the pipeline file and the small
// text files it references, and a KEDA ScaledObject that may scale them between two bounds.
// Written with yaml-cpp in a fixed key order, so the same input gives the same bytes.

#include <string>
#include <vector>

namespace redwood::app {

/// A file the pipeline references by a relative path below its own folder, small and text: it
/// travels in the ConfigMap and is mounted at /config/<relative>.
struct ConfigFileEntry {
  std::string relative;  // as resolved below the config's folder, "labels/coco80.txt"
  std::string text;
};

struct K8sInput {
  std::string pipeline_name;    // the file's `name`
  std::string pipeline_text;    // the file as written
  std::vector<ConfigFileEntry> files;
  int metrics_port = 9464;      // service.metrics.port
  std::vector<std::string> sets;  // --set overrides, passed on to `redwood run` in the pod
  std::string source;           // the file as named on the command line (a comment in the output)
  std::vector<std::string> pod_files;  // referenced files the image or a volume must provide, as pod paths
};

struct K8sOptions {
  int replicas = 1;
  int gpus_per_pod = 1;         // 0: a CPU deployment (no nvidia.com/gpu limit, no toleration)
  std::string image = "redwood:latest";
  std::string ns;               // empty: no metadata.namespace (kubectl's current one)
  std::string cpu_request = "2";
  std::string memory_request = "4Gi";
  std::string memory_limit = "8Gi";
  std::string assets_claim = "redwood-assets";  // PersistentVolumeClaim mounted at /assets (empty: none)
  int min_replicas = 0;         // KEDA bounds; 0: the replica count, and twice it (replica_bounds)
  int max_replicas = 0;
  std::string prometheus = "http://prometheus-server.monitoring.svc:80";
  std::string scale_query;      // empty: the default "falling behind" query (kDefaultScaleQuery)
  std::string scale_threshold = "1";
};

/// The uid and gid the image's user has (Dockerfile) and the pods run as.
inline constexpr int kRedwoodUid = 10001;

/// One object: its file name (`<kind>.yaml`) and its YAML document.
struct Manifest {
  std::string file;
  std::string yaml;
};

/// The ScaledObject's minReplicaCount and maxReplicaCount: --min-replicas (default --replicas)
/// and --max-replicas (default twice --replicas, at most kMaxShards: pipelines/shard.hpp).
struct ReplicaBounds {
  int min = 1, max = 1;
};
ReplicaBounds replica_bounds(const K8sOptions& options);

/// "redwood-<name>"; throws InvalidArgument unless the pipeline name makes a DNS-1123 label
/// short enough for a StatefulSet (52 characters with the prefix: its pods' revision label).
std::string k8s_object_name(const std::string& pipeline_name);

/// The PromQL of the default scaling trigger for `object_name`'s pods (frames dropped per second).
std::string default_scale_query(const std::string& pipeline_name);

/// The four objects, in apply order: ConfigMap, Service, StatefulSet, ScaledObject.
std::vector<Manifest> make_k8s_manifests(const K8sInput& input, const K8sOptions& options);

}  // namespace redwood::app
