// SPDX-License-Identifier: Apache-2.0
// Validates Kubernetes manifests against the Kubernetes API's schemas (the
// npm package kubernetes-models, and @kubernetes-models/prometheus-operator
// for ServiceMonitor and PrometheusRule) and prints, as one JSON object,
// each document's kind and the error, if any; with --yaml FILE..., prints
// the files parsed (the npm package yaml). tests/e2e/test_deploy.py judges.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";

const require = createRequire(process.env.NODE_MODULES + "/");
const YAML = require("yaml");
const core = require("kubernetes-models/v1");
const apps = require("kubernetes-models/apps/v1");
const batch = require("kubernetes-models/batch/v1");
const mon = require("@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1");

const kinds = {
  "v1/ConfigMap": core.ConfigMap, "v1/Service": core.Service, "v1/Secret": core.Secret,
  "v1/PersistentVolumeClaim": core.PersistentVolumeClaim,
  "apps/v1/Deployment": apps.Deployment, "batch/v1/Job": batch.Job,
  "monitoring.coreos.com/v1/ServiceMonitor": mon.ServiceMonitor,
  "monitoring.coreos.com/v1/PrometheusRule": mon.PrometheusRule,
};

const args = process.argv.slice(2);
const out = {};
if (args[0] === "--yaml") {
  for (const f of args.slice(1))
    out[f] = YAML.parseAllDocuments(readFileSync(f, "utf8")).map((d) => d.toJS());
} else {
  for (const f of args) {
    out[f] = YAML.parseAllDocuments(readFileSync(f, "utf8")).map((d) => {
      const doc = d.toJS();
      const key = `${doc.apiVersion}/${doc.kind}`;
      const Model = kinds[key];
      if (!Model) return { kind: key, error: "no schema for this kind" };
      try {
        new Model(doc).validate();
        return { kind: key, error: null };
      } catch (e) {
        return { kind: key, error: String(e.message || e) };
      }
    });
  }
}
console.log(JSON.stringify(out));
