// Validates Kubernetes objects offline against the OpenAPI schema of the API version
// kubernetes-models was generated from (its validate() throws on a violation).
//
//   node validate.mjs OBJECTS.json ...   (each file: a JSON array of objects)
//
// Prints one line per object and exits 1 if any object is invalid or of an unknown kind.
import { readFileSync } from "node:fs";

// apiVersion "apps/v1" -> module "kubernetes-models/apps/v1"; core "v1" -> "kubernetes-models/v1";
// the prometheus-operator CRDs (ServiceMonitor) come from their own package.
const kCrdPackages = { "monitoring.coreos.com": "@kubernetes-models/prometheus-operator" };

async function modelFor(apiVersion, kind) {
  const group = apiVersion.includes("/") ? apiVersion.split("/")[0] : "";
  const pkg = kCrdPackages[group] ?? "kubernetes-models";
  const mod = await import(`${pkg}/${apiVersion}`);
  return mod[kind];
}

let failures = 0;
for (const file of process.argv.slice(2)) {
  for (const object of JSON.parse(readFileSync(file, "utf8"))) {
    const name = `${file}: ${object.kind} ${object.metadata?.namespace ?? ""}/${object.metadata?.name}`;
    let Model;
    try {
      Model = await modelFor(object.apiVersion, object.kind);
    } catch (e) {
      Model = undefined;
    }
    if (!Model) {
      console.log(`FAIL ${name}: no schema for ${object.apiVersion} ${object.kind}`);
      failures++;
      continue;
    }
    try {
      new Model(object).validate();
      console.log(`ok   ${name}`);
    } catch (e) {
      console.log(`FAIL ${name}: ${e.message}`);
      failures++;
    }
  }
}
process.exit(failures === 0 ? 0 : 1);
