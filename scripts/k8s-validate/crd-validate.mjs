// Validates custom resources offline against the openAPIV3Schema of their published
// CustomResourceDefinitions (KServe's, committed in deploy/kserve/crds/), as the API server
// does with kubectl's default strict field validation:
//   - types, enums, required fields, patterns, bounds and int-or-string, as the schema says;
//   - an unknown field is an error (the API server's fieldValidation=Strict, kubectl's default
//     since Kubernetes 1.27), except below x-kubernetes-preserve-unknown-fields;
//   - the object's apiVersion must be a served version of the CRD's group, its kind the CRD's,
//     and metadata.name must be set.
// Formats (int32, quantity, ...) are not checked: the API server ignores most of them too.
//
//   node crd-validate.mjs CRDS.json OBJECTS.json ...
//     CRDS.json     a JSON array of CustomResourceDefinition objects
//     OBJECTS.json  JSON arrays of objects; each one's kind must have a CRD in CRDS.json
//
// Prints one line per object ("ok NAME" or "FAIL NAME: errors") and exits 1 if any fails.
import { readFileSync } from "node:fs";
import Ajv from "ajv";

// Returns a copy of a structural schema where each object schema that lists its properties,
// and neither allows others nor preserves unknown fields, refuses any other property.
function strict(schema) {
  if (Array.isArray(schema)) return schema.map(strict);
  if (schema === null || typeof schema !== "object") return schema;
  const out = {};
  for (const [key, value] of Object.entries(schema)) {
    // A schema keyword's value is a schema (or a map or list of them); these are data.
    out[key] = ["enum", "default", "example", "required"].includes(key) ? value : strict(value);
  }
  if (out.properties && out.additionalProperties === undefined &&
      !out["x-kubernetes-preserve-unknown-fields"]) {
    out.additionalProperties = false;
  }
  return out;
}

const [crdFile, ...objectFiles] = process.argv.slice(2);
if (!crdFile || objectFiles.length === 0) {
  console.error("usage: node crd-validate.mjs CRDS.json OBJECTS.json ...");
  process.exit(2);
}

// "group/version Kind" -> compiled validator.
const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false });
const validators = new Map();
for (const crd of JSON.parse(readFileSync(crdFile, "utf8"))) {
  for (const version of crd.spec.versions) {
    if (!version.served) continue;
    const key = `${crd.spec.group}/${version.name} ${crd.spec.names.kind}`;
    validators.set(key, ajv.compile(strict(version.schema.openAPIV3Schema)));
  }
}

let failed = 0;
for (const file of objectFiles) {
  for (const object of JSON.parse(readFileSync(file, "utf8"))) {
    const name = `${file}: ${object.kind} ${object.metadata?.namespace ?? ""}/${object.metadata?.name}`;
    const validate = validators.get(`${object.apiVersion} ${object.kind}`);
    let errors;
    if (!validate) {
      errors = [`no served CRD version for ${object.apiVersion} ${object.kind}`];
    } else if (!object.metadata?.name) {
      errors = ["metadata.name is missing"];
    } else if (!validate(object)) {
      errors = validate.errors.map((e) => {
        const extra = e.params?.additionalProperty ? ` '${e.params.additionalProperty}'` : "";
        return `${e.instancePath || "/"} ${e.message}${extra}`;
      });
    }
    if (errors) {
      failed++;
      console.log(`FAIL ${name}: ${errors.join("; ")}`);
    } else {
      console.log(`ok ${name}`);
    }
  }
}
process.exit(failed ? 1 : 0);
