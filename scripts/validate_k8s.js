#!/usr/bin/env node
// Checks Kubernetes manifests offline against the official OpenAPI schemas: every document of
// every file given (or of every .yaml in a folder given) is read with the `yaml` package and
// validated by its kind's class from kubernetes-models (core and apps objects) or
// @kubernetes-models/keda (ScaledObject), which run ajv over the published schema. Used by
// tests/apps/deploy_test.cpp on what `redwood deploy k8s` writes.
//
//   node scripts/validate_k8s.js DIR|FILE...      (packages: assets/tools/k8s, scripts/fetch_assets.sh)
//
// Prints "ok <file> <kind>/<name>" per valid document and "error <file> <kind>/<name>: ..." per
// invalid one; exits 0 when all are valid, 1 when one is not, 2 on a usage or setup problem.
// REDWOOD_K8S_MODULES overrides the node_modules folder.
"use strict";

const fs = require("fs");
const path = require("path");
const { createRequire } = require("module");
const { pathToFileURL } = require("url");

const modules = process.env.REDWOOD_K8S_MODULES ||
  path.join(__dirname, "..", "assets", "tools", "k8s", "node_modules");

// kind -> [package, module path] of the classes the generator writes.
const classes = {
  "v1/ConfigMap": ["kubernetes-models", "v1/ConfigMap"],
  "v1/Service": ["kubernetes-models", "v1/Service"],
  "apps/v1/StatefulSet": ["kubernetes-models", "apps/v1/StatefulSet"],
  "keda.sh/v1alpha1/ScaledObject": ["@kubernetes-models/keda", "keda.sh/v1alpha1/ScaledObject"],
};

function files(args) {
  const out = [];
  for (const a of args) {
    if (fs.statSync(a).isDirectory()) {
      for (const f of fs.readdirSync(a).sort()) if (f.endsWith(".yaml")) out.push(path.join(a, f));
    } else {
      out.push(a);
    }
  }
  return out;
}

async function main() {
  const args = process.argv.slice(2);
  if (args.length === 0) {
    console.error("usage: validate_k8s.js DIR|FILE...");
    return 2;
  }
  if (!fs.existsSync(path.join(modules, "kubernetes-models"))) {
    console.error(`validate_k8s: ${modules}/kubernetes-models missing (run scripts/fetch_assets.sh)`);
    return 2;
  }
  const req = createRequire(path.join(modules, "..", "package.json"));
  const YAML = req("yaml");
  let failed = 0, checked = 0;
  for (const file of files(args)) {
    const docs = YAML.parseAllDocuments(fs.readFileSync(file, "utf8"));
    for (const doc of docs) {
      if (doc.errors.length) {
        console.log(`error ${file}: YAML: ${doc.errors.map((e) => e.message).join("; ")}`);
        failed++;
        continue;
      }
      const object = doc.toJS();
      if (object === null) continue;  // an empty document (a leading ---)
      const key = `${object.apiVersion}/${object.kind}`;
      const name = `${object.kind}/${(object.metadata || {}).name}`;
      const entry = classes[key];
      if (!entry) {
        console.log(`error ${file} ${name}: no schema here for ${key}`);
        failed++;
        continue;
      }
      // The packages are ES modules whose exports map answers `import` only: imported by file URL.
      const resolved = path.join(modules, entry[0], `${entry[1]}.js`);
      const mod = await import(pathToFileURL(resolved).href);
      const Model = mod[path.basename(entry[1])];
      try {
        new Model(object).validate();
        console.log(`ok ${file} ${name}`);
        checked++;
      } catch (e) {
        console.log(`error ${file} ${name}: ${e.message}`);
        failed++;
      }
    }
  }
  console.log(`${checked} valid, ${failed} invalid`);
  return failed ? 1 : 0;
}

main().then((code) => process.exit(code), (e) => {
  console.error(`validate_k8s: ${e.stack || e}`);
  process.exit(2);
});
