// Validates Kubernetes objects offline, in two passes:
//   1. against the OpenAPI schema of the Kubernetes version kubernetes-models was generated from
//      (its validate() throws on a violation: types, enums, required fields, formats);
//   2. for fields that schema does not know (a misspelt key, a key at the wrong level), which
//      it lets through: every object becomes a TypeScript object literal typed with
//      kubernetes-models' interface for its kind, and the TypeScript compiler, which allows
//      only known properties in an object literal, checks them all (one program, no output).
//
//   node validate.mjs OBJECTS.json ...   (each file: a JSON array of objects)
//
// Prints one line per object and exits 1 if any object is invalid or of an unknown kind.
import { readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import ts from "typescript";

// apiVersion "apps/v1" -> module "kubernetes-models/apps/v1"; core "v1" -> "kubernetes-models/v1";
// the prometheus-operator CRDs (ServiceMonitor) come from their own package.
const kCrdPackages = { "monitoring.coreos.com": "@kubernetes-models/prometheus-operator" };

function packageFor(apiVersion) {
  const group = apiVersion.includes("/") ? apiVersion.split("/")[0] : "";
  return kCrdPackages[group] ?? "kubernetes-models";
}

async function modelFor(apiVersion, kind) {
  const mod = await import(`${packageFor(apiVersion)}/${apiVersion}`);
  return mod[kind];
}

const results = [];  // {name, error}, in input order
const typed = [];    // objects for pass 2: {result, object}
for (const file of process.argv.slice(2)) {
  for (const object of JSON.parse(readFileSync(file, "utf8"))) {
    const result = {
      name: `${file}: ${object.kind} ${object.metadata?.namespace ?? ""}/${object.metadata?.name}`,
      error: null,
    };
    results.push(result);
    let Model;
    try {
      Model = await modelFor(object.apiVersion, object.kind);
    } catch (e) {
      Model = undefined;
    }
    if (!Model) {
      result.error = `no schema for ${object.apiVersion} ${object.kind}`;
      continue;
    }
    try {
      new Model(object).validate();
    } catch (e) {
      result.error = e.message;
      continue;
    }
    typed.push({ result, object });
  }
}

// Pass 2. Each object's literal spans known lines of the generated file, so that a diagnostic
// names its object and the line of JSON it is about.
const imports = [];
const body = [];
let line = typed.length;  // one import line per object comes first
typed.forEach(({ object }, i) => {
  const module = `${packageFor(object.apiVersion)}/${object.apiVersion}/${object.kind}`;
  imports.push(`import type { I${object.kind} as T${i} } from ${JSON.stringify(module)};`);
  const text = `export const o${i}: T${i} = ${JSON.stringify(object, null, 1)};`;
  typed[i].firstLine = line;
  typed[i].lines = text.split("\n");
  line += typed[i].lines.length;
  body.push(text);
});
const source = fileURLToPath(new URL("./strict-check.ts", import.meta.url));
writeFileSync(source, [...imports, ...body].join("\n") + "\n");
const program = ts.createProgram([source], {
  strict: true,
  noEmit: true,
  module: ts.ModuleKind.NodeNext,
  moduleResolution: ts.ModuleResolutionKind.NodeNext,
  skipLibCheck: true,
  types: [],
});
for (const d of ts.getPreEmitDiagnostics(program)) {
  const message = ts.flattenDiagnosticMessageText(d.messageText, " ");
  if (!d.file || d.file.fileName !== source) {
    results.push({ name: "TypeScript", error: message });
    continue;
  }
  const at = d.file.getLineAndCharacterOfPosition(d.start).line;
  const entry = typed.find((t) => at >= t.firstLine && at < t.firstLine + t.lines.length);
  if (!entry) {
    results.push({ name: `${source}:${at + 1}`, error: message });
    continue;
  }
  const near = entry.lines[at - entry.firstLine].trim();
  entry.result.error = (entry.result.error ? entry.result.error + "; " : "") +
    `${message} (at ${near})`;
}

let failures = 0;
for (const { name, error } of results) {
  if (error) {
    console.log(`FAIL ${name}: ${error}`);
    failures++;
  } else {
    console.log(`ok   ${name}`);
  }
}
process.exit(failures === 0 ? 0 : 1);
