// `redwood deploy k8s` as a user runs it: the four manifests for configs/ocr-video.yaml, the
// fields the pods depend on (replicas, the GPU limit, the probes on the metrics port, the shard
// variables and the Service they count, a non-root read-only container, the autoscaler's
// bounds), the same bytes every time, the referenced text files in the ConfigMap, and the
// mistakes it refuses. DeployK8sSchema checks the output against the Kubernetes and KEDA
// OpenAPI schemas offline (scripts/validate_k8s.js; skipped without node or the packages
// scripts/fetch_assets.sh installs).

#include "support/onnx_builder.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <fstream>
#include <sstream>

namespace redwood {
namespace {

namespace fs = std::filesystem;

const fs::path kSource = REDWOOD_SOURCE_DIR;
const std::string kConfig = (kSource / "configs" / "ocr-video.yaml").string();
// The shipped file binds ZeroMQ on a fixed port when it is built; any free one here, so that the
// check cannot collide with another test running the same file.
const std::string kAnyPort = " --set 'sinks.pub.endpoint=tcp://127.0.0.1:*'";

std::string contents(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool have_ocr_assets() {
  return fs::exists(testing::assets_dir() / "models" / "ch_PP-OCRv4_det_infer.onnx") &&
         fs::exists(testing::assets_dir() / "video" / "vtest-captions.avi");
}

YAML::Node env_named(const YAML::Node& container, const std::string& name) {
  for (const auto& e : container["env"]) {
    if (e["name"].as<std::string>() == name) return e;
  }
  return {};
}

TEST(DeployK8s, WritesTheFourObjectsForOcrVideo) {
  if (!have_ocr_assets()) GTEST_SKIP() << "OCR assets missing (scripts/fetch_assets.sh)";
  const fs::path dir = testing::temp_dir("deploy") / "k8s";
  const auto r = testing::run_launcher("deploy k8s " + kConfig + " --replicas 3 --out " + dir.string() + kAnyPort);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* f : {"configmap.yaml", "service.yaml", "statefulset.yaml", "scaledobject.yaml"}) {
    ASSERT_TRUE(fs::exists(dir / f)) << f << "\n" << r.output;
  }
  EXPECT_NE(r.output.find("the pods need /assets/models/ch_PP-OCRv4_det_infer.onnx"), std::string::npos) << r.output;

  const YAML::Node set = YAML::LoadFile((dir / "statefulset.yaml").string());
  EXPECT_EQ(set["kind"].as<std::string>(), "StatefulSet");
  EXPECT_EQ(set["metadata"]["name"].as<std::string>(), "redwood-ocr-video");
  EXPECT_EQ(set["spec"]["replicas"].as<int>(), 3);
  EXPECT_EQ(set["spec"]["podManagementPolicy"].as<std::string>(), "Parallel");
  const YAML::Node pod = set["spec"]["template"]["spec"];
  const YAML::Node c = pod["containers"][0];
  EXPECT_EQ(c["image"].as<std::string>(), "redwood:latest");
  const auto command = c["command"].as<std::vector<std::string>>();
  ASSERT_GE(command.size(), 7u);
  EXPECT_EQ(std::vector<std::string>(command.begin(), command.begin() + 7),
            (std::vector<std::string>{"redwood", "run", "/config/pipeline.yaml", "--shard", "statefulset", "--set",
                                      "service.metrics.address=0.0.0.0"}));
  EXPECT_EQ(env_named(c, "POD_NAME")["valueFrom"]["fieldRef"]["fieldPath"].as<std::string>(), "metadata.name");
  // The count is the headless Service's addresses, followed while the pods run: no fixed count.
  EXPECT_EQ(env_named(c, "REDWOOD_PEERS")["value"].as<std::string>(), "redwood-ocr-video");
  EXPECT_TRUE(env_named(c, "REDWOOD_REPLICAS").IsNull());
  EXPECT_EQ(c["resources"]["limits"]["nvidia.com/gpu"].as<int>(), 1);
  EXPECT_EQ(c["ports"][0]["name"].as<std::string>(), "metrics");
  EXPECT_EQ(c["ports"][0]["containerPort"].as<int>(), 9464);  // service.metrics.port of the file
  EXPECT_EQ(c["readinessProbe"]["httpGet"]["path"].as<std::string>(), "/readyz");
  EXPECT_EQ(c["readinessProbe"]["httpGet"]["port"].as<std::string>(), "metrics");
  EXPECT_EQ(c["livenessProbe"]["httpGet"]["path"].as<std::string>(), "/healthz");
  EXPECT_EQ(c["livenessProbe"]["httpGet"]["port"].as<std::string>(), "metrics");
  EXPECT_TRUE(c["securityContext"]["runAsNonRoot"].as<bool>());
  EXPECT_EQ(c["securityContext"]["runAsUser"].as<int>(), 10001);
  EXPECT_TRUE(c["securityContext"]["readOnlyRootFilesystem"].as<bool>());
  EXPECT_FALSE(c["securityContext"]["allowPrivilegeEscalation"].as<bool>());
  EXPECT_EQ(c["securityContext"]["capabilities"]["drop"][0].as<std::string>(), "ALL");
  EXPECT_TRUE(pod["securityContext"]["runAsNonRoot"].as<bool>());
  EXPECT_EQ(c["volumeMounts"][0]["mountPath"].as<std::string>(), "/config");
  EXPECT_EQ(c["volumeMounts"][1]["mountPath"].as<std::string>(), "/tmp");
  EXPECT_TRUE(pod["volumes"][1]["emptyDir"].IsMap());

  const YAML::Node service = YAML::LoadFile((dir / "service.yaml").string());
  EXPECT_EQ(service["spec"]["clusterIP"].as<std::string>(), "None");
  EXPECT_EQ(service["metadata"]["name"].as<std::string>(), "redwood-ocr-video");
  EXPECT_TRUE(service["spec"]["publishNotReadyAddresses"].as<bool>()) << "a pod loading its models counts";
  EXPECT_EQ(service["spec"]["ports"][0]["port"].as<int>(), 9464);
  const YAML::Node cm = YAML::LoadFile((dir / "configmap.yaml").string());
  EXPECT_EQ(cm["data"]["pipeline.yaml"].as<std::string>(), contents(kConfig)) << "the file as written";
  const YAML::Node so = YAML::LoadFile((dir / "scaledobject.yaml").string());
  EXPECT_EQ(so["apiVersion"].as<std::string>(), "keda.sh/v1alpha1");
  EXPECT_EQ(so["spec"]["scaleTargetRef"]["kind"].as<std::string>(), "StatefulSet");
  EXPECT_EQ(so["spec"]["scaleTargetRef"]["name"].as<std::string>(), "redwood-ocr-video");
  EXPECT_EQ(so["spec"]["minReplicaCount"].as<int>(), 3);  // --replicas
  EXPECT_EQ(so["spec"]["maxReplicaCount"].as<int>(), 6);  // twice it
  EXPECT_EQ(so["spec"]["triggers"][0]["type"].as<std::string>(), "prometheus");
  EXPECT_EQ(so["spec"]["triggers"][0]["metadata"]["query"].as<std::string>(),
            "sum(rate(redwood_stream_frames_dropped_total{pipeline=\"ocr-video\"}[1m]))");
}

TEST(DeployK8s, StdoutIsTheSameDocumentsEveryTime) {
  const fs::path dir = testing::temp_dir("deploy") / "k8s";
  const std::string args = "deploy k8s " + kConfig + " --replicas 2 --gpus-per-pod 0 --namespace video --parse-only";
  const auto a = testing::run_launcher(args + " 2>/dev/null");
  const auto b = testing::run_launcher(args + " 2>/dev/null");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_EQ(a.output, b.output);
  ASSERT_EQ(testing::run_launcher(args + " --out " + dir.string()).exit_code, 0);
  std::string joined;
  for (const char* f : {"configmap.yaml", "service.yaml", "statefulset.yaml", "scaledobject.yaml"}) {
    joined += "---\n" + contents(dir / f);
  }
  EXPECT_EQ(a.output, joined) << "one stream to stdout, the same objects as the files";

  const std::vector<YAML::Node> docs = YAML::LoadAll(a.output);
  ASSERT_EQ(docs.size(), 4u);
  for (const auto& d : docs) EXPECT_EQ(d["metadata"]["namespace"].as<std::string>(), "video");
  const YAML::Node pod = docs[2]["spec"]["template"]["spec"];
  EXPECT_FALSE(pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"]) << "--gpus-per-pod 0: a CPU pod";
  EXPECT_FALSE(pod["tolerations"]);
  EXPECT_EQ(env_named(pod["containers"][0], "REDWOOD_PEERS")["value"].as<std::string>(), "redwood-ocr-video");
}

TEST(DeployK8s, CarriesSmallTextFilesBelowTheConfigAndNamesTheOthers) {
  const fs::path dir = testing::temp_dir("deploy");
  fs::create_directories(dir / "conf" / "labels");
  fs::create_directories(dir / "models");
  std::ofstream(dir / "conf" / "labels" / "names.txt") << "person\ncar\n";
  std::ofstream(dir / "models" / "m.onnx") << std::string("not text\0 at all", 16);  // binary: a NUL byte
  std::ofstream(dir / "conf" / "p.yaml") << "version: 1\nname: small\nservice:\n  metrics:\n    port: 9000\n"
                                            "models:\n  m:\n    path: ../models/m.onnx\n"
                                            "stages:\n  - name: c\n    labels: labels/names.txt\n";
  const auto r = testing::run_launcher("deploy k8s " + (dir / "conf" / "p.yaml").string() +
                                       " --replicas 1 --parse-only --out " + (dir / "out").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("the pods need /models/m.onnx"), std::string::npos) << r.output;
  const YAML::Node cm = YAML::LoadFile((dir / "out" / "configmap.yaml").string());
  EXPECT_EQ(cm["data"]["labels__names.txt"].as<std::string>(), "person\ncar\n");
  EXPECT_FALSE(cm["data"]["m.onnx"]);
  const YAML::Node set = YAML::LoadFile((dir / "out" / "statefulset.yaml").string());
  const YAML::Node items = set["spec"]["template"]["spec"]["volumes"][0]["configMap"]["items"];
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[1]["key"].as<std::string>(), "labels__names.txt");
  EXPECT_EQ(items[1]["path"].as<std::string>(), "labels/names.txt");
  EXPECT_EQ(set["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"].as<int>(), 9000);

  // A model inside the config's folder would be hidden by the ConfigMap mount: refused.
  fs::copy_file(dir / "models" / "m.onnx", dir / "conf" / "m.onnx");
  std::ofstream(dir / "conf" / "q.yaml") << "name: q\nservice:\n  metrics:\n    port: 9000\nmodels:\n  m:\n    path: m.onnx\n";
  const auto bad = testing::run_launcher("deploy k8s " + (dir / "conf" / "q.yaml").string() + " --replicas 1 --parse-only");
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_NE(bad.output.find("q.yaml:7:11: 'm.onnx' is in the pipeline file's folder but is not a small text file"),
            std::string::npos)
      << bad.output;
}

TEST(DeployK8s, RefusesWhatCannotDeploy) {
  const auto zero = testing::run_launcher("deploy k8s " + kConfig + " --replicas 0 --parse-only");
  EXPECT_EQ(zero.exit_code, 1);
  EXPECT_NE(zero.output.find("--replicas must be from 1 to 65536 (got 0)"), std::string::npos) << zero.output;

  const auto missing = testing::run_launcher("deploy k8s /nonexistent/p.yaml --replicas 1");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.output.find("/nonexistent/p.yaml"), std::string::npos) << missing.output;

  const auto off = testing::run_launcher("deploy k8s " + kConfig + " --replicas 1 --parse-only --set service.metrics.enabled=false");
  EXPECT_EQ(off.exit_code, 1);
  EXPECT_NE(off.output.find("service.metrics is off"), std::string::npos) << off.output;

  const auto any_port = testing::run_launcher("deploy k8s " + kConfig + " --replicas 1 --parse-only --set service.metrics.port=0");
  EXPECT_EQ(any_port.exit_code, 1);
  EXPECT_NE(any_port.output.find("service.metrics.port is 0"), std::string::npos) << any_port.output;

  const auto upper = testing::run_launcher("deploy k8s " + kConfig + " --replicas 1 --parse-only --set name=OCR");
  EXPECT_EQ(upper.exit_code, 1);
  EXPECT_NE(upper.output.find("pipeline name 'OCR' cannot name Kubernetes objects"), std::string::npos) << upper.output;
}

// KEDA's bounds: the defaults, chosen ones, and bounds that cannot hold; no warning about a
// fixed count (the pods follow whatever count KEDA sets).
TEST(DeployK8s, AutoscalerBoundsDefaultToReplicasAndTwiceThem) {
  const auto bounds = [](const std::string& options) {
    const auto r = testing::run_launcher("deploy k8s " + kConfig + " --parse-only " + options);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(r.output.find("warning"), std::string::npos) << r.output;
    const std::vector<YAML::Node> docs = YAML::LoadAll(r.output);
    if (docs.size() != 4u) return std::make_pair(-1, -1);
    return std::make_pair(docs[3]["spec"]["minReplicaCount"].as<int>(), docs[3]["spec"]["maxReplicaCount"].as<int>());
  };
  EXPECT_EQ(bounds("--replicas 4"), std::make_pair(4, 8));
  EXPECT_EQ(bounds("--replicas 2 --min-replicas 1 --max-replicas 10"), std::make_pair(1, 10));
  EXPECT_EQ(bounds("--replicas 40000"), std::make_pair(40000, 65536));

  const auto error = [](const std::string& options) {
    const auto r = testing::run_launcher("deploy k8s " + kConfig + " --parse-only " + options);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    return r.output;
  };
  EXPECT_NE(error("--replicas 2 --min-replicas 5 --max-replicas 4").find("--min-replicas 5 is above --max-replicas 4"),
            std::string::npos);
  EXPECT_NE(error("--replicas 5 --max-replicas 4").find("--replicas 5 is above --max-replicas 4 (KEDA's maxReplicaCount)"),
            std::string::npos);
  EXPECT_NE(error("--replicas 2 --min-replicas 3").find("--replicas 2 is below --min-replicas 3 (KEDA's minReplicaCount)"),
            std::string::npos);
  EXPECT_NE(error("--replicas 2 --max-replicas 70000").find("must be from 1 to 65536 (got 0 and 70000)"),
            std::string::npos);
}

// A mistake a stage finds when it is built fails deploy as it fails `redwood run`: one message.
TEST(DeployK8s, ABadFileFailsAsRunFails) {
  if (!have_ocr_assets()) GTEST_SKIP() << "OCR assets missing (scripts/fetch_assets.sh)";
  const std::string bad = " --set stages.det.max_batch=0" + kAnyPort;
  const auto deploy = testing::run_launcher("deploy k8s " + kConfig + " --replicas 1" + bad);
  const auto run = testing::run_launcher("run " + kConfig + " --quiet --set service.metrics.enabled=false" + bad);
  EXPECT_EQ(deploy.exit_code, 1) << deploy.output;
  EXPECT_EQ(run.exit_code, 1) << run.output;
  const auto error_line = [](const std::string& out) {
    const auto at = out.find("redwood: error: ");
    return at == std::string::npos ? std::string() : out.substr(at, out.find('\n', at) - at);
  };
  ASSERT_FALSE(error_line(deploy.output).empty()) << deploy.output;
  EXPECT_EQ(error_line(deploy.output), error_line(run.output));
  EXPECT_NE(error_line(deploy.output).find("max_batch"), std::string::npos) << deploy.output;
}

// The offline schema check: what deploy writes is accepted, and the validator does reject a
// wrong document (so that "accepted" means something).
TEST(DeployK8sSchema, OcrVideoManifestsMatchTheOpenApiSchemas) {
  if (testing::run_command("command -v node").exit_code != 0) GTEST_SKIP() << "node not found";
  if (!fs::exists(kSource / "assets" / "tools" / "k8s" / "node_modules" / "kubernetes-models")) {
    GTEST_SKIP() << "assets/tools/k8s missing (scripts/fetch_assets.sh installs kubernetes-models)";
  }
  const fs::path dir = testing::temp_dir("deploy") / "k8s";
  const bool full = have_ocr_assets();
  const auto r = testing::run_launcher("deploy k8s " + kConfig + " --replicas 3 --out " + dir.string() +
                                       (full ? kAnyPort : std::string(" --parse-only")));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string validator = "node " + (kSource / "scripts" / "validate_k8s.js").string() + " ";
  const auto ok = testing::run_command(validator + dir.string());
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_NE(ok.output.find("4 valid, 0 invalid"), std::string::npos) << ok.output;

  std::string set = contents(dir / "statefulset.yaml");
  const auto at = set.find("  replicas: 3\n");
  ASSERT_NE(at, std::string::npos) << set;
  set.replace(at, 14, "  replicas: three\n");
  std::ofstream(dir / "statefulset.yaml", std::ios::trunc) << set;
  const auto bad = testing::run_command(validator + (dir / "statefulset.yaml").string());
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_NE(bad.output.find("data/spec/replicas must be integer"), std::string::npos) << bad.output;
}

}  // namespace
}  // namespace redwood
