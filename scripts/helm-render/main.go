// helm-render: renders a Helm chart offline the way `helm template` (Helm 3) does, for
// scripts/check_deploy.sh on machines without helm (Helm is not packaged for Debian 12 and
// cannot be downloaded there).
//
//	helm-render [-n NAMESPACE] [-f VALUES.yaml]... [--set K=V]... [--set-string K=V]...
//	            [--kube-version v1.31.0] [--api-versions GROUP/VERSION]... [--strict] [--notes]
//	            RELEASE CHART_DIR
//
// Exit 0 with the manifests on stdout; 1 with "Error: ..." on stderr on any failure (template
// error, fail/required, schema violation, invalid YAML); 2 on bad usage.
//
// Built with Debian's Go (GOPATH mode) and Debian-packaged libraries only, the ones Helm 3
// itself uses (sprig v3, sigs.k8s.io/yaml's predecessor ghodss/yaml, gojsonschema). What it
// does as Helm does:
//   - text/template with sprig's function map (minus env/expandenv), plus Helm's own functions:
//     include, tpl, required, fail, lookup (always empty, as in `helm template`), toYaml,
//     fromYaml, fromYamlArray, toJson, fromJson, fromJsonArray; missingkey=zero (--strict:
//     error, as `helm lint --strict`) and "<no value>" removed from the output;
//   - values: the chart's values.yaml, then -f files (merged in order), then --set and
//     --set-string (strvals rules: a.b[0]=x, {a,b} lists, true/false/null/integers typed),
//     coalesced with the chart's values (a null removes a default); YAML is read through the
//     same YAML-to-JSON conversion (numbers are float64);
//   - values.schema.json checked against the coalesced values before rendering;
//   - .Release (Name, Namespace, Revision 1, Service "Helm", IsInstall), .Chart (Chart.yaml),
//     .Capabilities (KubeVersion from --kube-version, APIVersions: common groups plus
//     --api-versions), .Template (Name, BasePath), .Files (Get, GetBytes, Lines);
//   - every file in templates/ is parsed; files whose name starts with "_" are not rendered,
//     NOTES.txt is rendered but not printed (--notes prints it); outputs are split into
//     documents, each must parse as YAML, printed in Helm's install order as
//     "---\n# Source: CHART/templates/FILE\n...".
//
// Stricter than `helm template`: a duplicate key in a rendered document, a document without
// apiVersion or kind, or a metadata.name that is not a DNS-1123 subdomain is an error.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/template"

	"github.com/Masterminds/semver"
	"github.com/Masterminds/sprig"
	"github.com/ghodss/yaml"
	"github.com/xeipuuv/gojsonschema"
	yamlv2 "gopkg.in/yaml.v2"
)

// Maintainer and Metadata mirror helm.sh/helm/v3/pkg/chart: templates see .Chart.Name etc.
type Maintainer struct {
	Name  string `json:"name,omitempty"`
	Email string `json:"email,omitempty"`
	URL   string `json:"url,omitempty"`
}

type Metadata struct {
	Name         string                   `json:"name,omitempty"`
	Home         string                   `json:"home,omitempty"`
	Sources      []string                 `json:"sources,omitempty"`
	Version      string                   `json:"version,omitempty"`
	Description  string                   `json:"description,omitempty"`
	Keywords     []string                 `json:"keywords,omitempty"`
	Maintainers  []*Maintainer            `json:"maintainers,omitempty"`
	Icon         string                   `json:"icon,omitempty"`
	APIVersion   string                   `json:"apiVersion,omitempty"`
	Condition    string                   `json:"condition,omitempty"`
	Tags         string                   `json:"tags,omitempty"`
	AppVersion   string                   `json:"appVersion,omitempty"`
	Deprecated   bool                     `json:"deprecated,omitempty"`
	Annotations  map[string]string        `json:"annotations,omitempty"`
	KubeVersion  string                   `json:"kubeVersion,omitempty"`
	Dependencies []map[string]interface{} `json:"dependencies,omitempty"`
	Type         string                   `json:"type,omitempty"`
}

// KubeVersion, VersionSet and Capabilities mirror helm.sh/helm/v3/pkg/chartutil.
type KubeVersion struct {
	Version string
	Major   string
	Minor   string
}

func (kv *KubeVersion) String() string { return kv.Version }

// GitVersion is the Kubernetes version string (deprecated in Helm, still used by charts).
func (kv *KubeVersion) GitVersion() string { return kv.Version }

type VersionSet []string

func (v VersionSet) Has(apiVersion string) bool {
	for _, x := range v {
		if x == apiVersion {
			return true
		}
	}
	return false
}

type HelmVersion struct {
	Version string
}

type Capabilities struct {
	KubeVersion KubeVersion
	APIVersions VersionSet
	HelmVersion HelmVersion
}

// Files is .Files: the chart's files outside templates/ and the chart's own metadata.
type Files map[string][]byte

func (f Files) GetBytes(name string) []byte { return f[name] }
func (f Files) Get(name string) string      { return string(f[name]) }
func (f Files) Lines(name string) []string {
	s := string(f[name])
	if s == "" {
		return []string{}
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// The API versions `helm template` assumes without a cluster (chartutil.DefaultVersionSet is
// the client's full list; these are the groups a chart typically asks about).
var defaultAPIVersions = []string{
	"v1", "apps/v1", "batch/v1", "networking.k8s.io/v1", "policy/v1", "rbac.authorization.k8s.io/v1",
	"autoscaling/v2", "storage.k8s.io/v1", "apiextensions.k8s.io/v1", "admissionregistration.k8s.io/v1",
	"coordination.k8s.io/v1", "discovery.k8s.io/v1", "scheduling.k8s.io/v1", "node.k8s.io/v1",
}

// ---- values --------------------------------------------------------------------------------

// readValues parses YAML the way Helm's chartutil.ReadValues does (YAML -> JSON -> Go values).
func readValues(data []byte) (map[string]interface{}, error) {
	vals := map[string]interface{}{}
	if err := yaml.Unmarshal(data, &vals); err != nil {
		return nil, err
	}
	if vals == nil {
		vals = map[string]interface{}{}
	}
	return vals, nil
}

func deepCopy(v interface{}) interface{} {
	switch t := v.(type) {
	case map[string]interface{}:
		out := make(map[string]interface{}, len(t))
		for k, x := range t {
			out[k] = deepCopy(x)
		}
		return out
	case []interface{}:
		out := make([]interface{}, len(t))
		for i, x := range t {
			out[i] = deepCopy(x)
		}
		return out
	}
	return v
}

// mergeMaps is Helm's merge of successive -f files: maps merge, anything else replaces.
func mergeMaps(a, b map[string]interface{}) map[string]interface{} {
	out := make(map[string]interface{}, len(a))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		if vm, ok := v.(map[string]interface{}); ok {
			if bv, ok := out[k]; ok {
				if bm, ok := bv.(map[string]interface{}); ok {
					out[k] = mergeMaps(bm, vm)
					continue
				}
			}
		}
		out[k] = v
	}
	return out
}

// coalesce is Helm's chartutil.CoalesceValues for a chart without subcharts: the user's values
// `v` win, the chart's `defaults` fill in, and a user's null removes the key.
func coalesce(v, defaults map[string]interface{}, prefix string, warn func(string)) {
	for key, val := range defaults {
		if value, ok := v[key]; ok {
			if value == nil {
				delete(v, key)
			} else if dest, ok := value.(map[string]interface{}); ok {
				src, ok := val.(map[string]interface{})
				if !ok {
					if val != nil {
						warn(fmt.Sprintf("skipped value for %s%s: Not a table.", prefix, key))
					}
				} else {
					coalesceTables(dest, src, prefix+key+".", warn)
				}
			}
		} else {
			v[key] = val
		}
	}
}

func coalesceTables(dst, src map[string]interface{}, prefix string, warn func(string)) {
	for key, val := range src {
		dv, ok := dst[key]
		if ok && dv == nil {
			delete(dst, key)
		} else if !ok {
			dst[key] = val
		} else if sv, isTable := val.(map[string]interface{}); isTable {
			if dt, ok := dv.(map[string]interface{}); ok {
				coalesceTables(dt, sv, prefix+key+".", warn)
			} else {
				warn(fmt.Sprintf("cannot overwrite table with non table for %s%s (%v)", prefix, key, val))
			}
		} else if _, ok := dv.(map[string]interface{}); ok && val != nil {
			warn(fmt.Sprintf("destination for %s%s is a table. Ignoring non-table value (%v)", prefix, key, val))
		}
	}
}

// typedVal is Helm's strvals typing of a --set value.
func typedVal(val string, asString bool) interface{} {
	if asString {
		return val
	}
	switch {
	case strings.EqualFold(val, "true"):
		return true
	case strings.EqualFold(val, "false"):
		return false
	case strings.EqualFold(val, "null"):
		return nil
	case val == "0":
		return int64(0)
	}
	if len(val) != 0 && val[0] != '0' {
		if iv, err := strconv.ParseInt(val, 10, 64); err == nil {
			return iv
		}
	}
	return val
}

// splitUnescaped splits s at unescaped `sep` outside {...}, keeping the escapes in the parts.
func splitUnescaped(s string, sep rune) []string {
	var parts []string
	var cur strings.Builder
	depth := 0
	escaped := false
	for _, r := range s {
		switch {
		case escaped:
			cur.WriteRune('\\')
			cur.WriteRune(r)
			escaped = false
			continue
		case r == '\\':
			escaped = true
			continue
		case r == '{':
			depth++
		case r == '}':
			if depth > 0 {
				depth--
			}
		case r == sep && depth == 0:
			parts = append(parts, cur.String())
			cur.Reset()
			continue
		}
		cur.WriteRune(r)
	}
	if escaped {
		cur.WriteRune('\\')
	}
	return append(parts, cur.String())
}

func unescape(s string) string {
	var out strings.Builder
	escaped := false
	for _, r := range s {
		if !escaped && r == '\\' {
			escaped = true
			continue
		}
		escaped = false
		out.WriteRune(r)
	}
	return out.String()
}

var indexRe = regexp.MustCompile(`^(.*?)((?:\[[0-9]+\])+)$`)

type pathStep struct {
	key   string
	index int // -1: a map key; else a list index within `key`
}

// parseKey turns `a.b\.c[1][2].d` into steps.
func parseKey(key string) ([]pathStep, error) {
	var steps []pathStep
	for _, seg := range splitUnescaped(key, '.') {
		m := indexRe.FindStringSubmatch(seg)
		name := seg
		var indexes []int
		if m != nil {
			name = m[1]
			for _, ix := range regexp.MustCompile(`[0-9]+`).FindAllString(m[2], -1) {
				n, _ := strconv.Atoi(ix)
				if n > 65536 {
					return nil, fmt.Errorf("index of %q too large", key)
				}
				indexes = append(indexes, n)
			}
		}
		name = unescape(name)
		if name == "" {
			return nil, fmt.Errorf("key %q has no name", key)
		}
		steps = append(steps, pathStep{key: name, index: -1})
		for _, n := range indexes {
			steps = append(steps, pathStep{index: n})
		}
	}
	return steps, nil
}

// setPath assigns val at steps inside container (a map or a list), growing lists as needed.
func setPath(container interface{}, steps []pathStep, val interface{}) (interface{}, error) {
	step := steps[0]
	last := len(steps) == 1
	if step.index < 0 {
		m, ok := container.(map[string]interface{})
		if !ok || m == nil {
			m = map[string]interface{}{}
		}
		if last {
			m[step.key] = val
			return m, nil
		}
		child, err := setPath(m[step.key], steps[1:], val)
		if err != nil {
			return nil, err
		}
		m[step.key] = child
		return m, nil
	}
	list, _ := container.([]interface{})
	for len(list) <= step.index {
		list = append(list, nil)
	}
	if last {
		list[step.index] = val
		return list, nil
	}
	child, err := setPath(list[step.index], steps[1:], val)
	if err != nil {
		return nil, err
	}
	list[step.index] = child
	return list, nil
}

// parseSet applies one --set / --set-string argument ("a.b=1,c={x,y}") to dest.
func parseSet(arg string, dest map[string]interface{}, asString bool) error {
	for _, assignment := range splitUnescaped(arg, ',') {
		if assignment == "" {
			continue
		}
		kv := splitUnescaped(assignment, '=')
		if len(kv) < 2 {
			return fmt.Errorf("key %q has no value", unescape(assignment))
		}
		key := kv[0]
		raw := strings.Join(kv[1:], "=")
		var val interface{}
		if strings.HasPrefix(raw, "{") && strings.HasSuffix(raw, "}") {
			list := []interface{}{}
			inner := raw[1 : len(raw)-1]
			if inner != "" {
				for _, item := range splitUnescaped(inner, ',') {
					list = append(list, typedVal(unescape(item), asString))
				}
			}
			val = list
		} else {
			val = typedVal(unescape(raw), asString)
		}
		steps, err := parseKey(key)
		if err != nil {
			return err
		}
		if _, err := setPath(dest, steps, val); err != nil {
			return err
		}
	}
	return nil
}

// validateSchema is Helm's chartutil.ValidateAgainstSingleSchema.
func validateSchema(chartName string, values map[string]interface{}, schema []byte) error {
	valuesYAML, err := yaml.Marshal(values)
	if err != nil {
		return err
	}
	valuesJSON, err := yaml.YAMLToJSON(valuesYAML)
	if err != nil {
		return err
	}
	if bytes.Equal(valuesJSON, []byte("null")) {
		valuesJSON = []byte("{}")
	}
	result, err := gojsonschema.Validate(gojsonschema.NewBytesLoader(schema),
		gojsonschema.NewBytesLoader(valuesJSON))
	if err != nil {
		return fmt.Errorf("%s/values.schema.json: %v", chartName, err)
	}
	if result.Valid() {
		return nil
	}
	var sb strings.Builder
	for _, desc := range result.Errors() {
		sb.WriteString(fmt.Sprintf("- %s\n", desc))
	}
	return fmt.Errorf("values don't meet the specifications of the schema(s) in the following "+
		"chart(s):\n%s:\n%s", chartName, sb.String())
}

// ---- template functions ----------------------------------------------------------------------

func toYAML(v interface{}) string {
	data, err := yaml.Marshal(v)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(data), "\n")
}

func fromYAML(str string) map[string]interface{} {
	m := map[string]interface{}{}
	if err := yaml.Unmarshal([]byte(str), &m); err != nil {
		m["Error"] = err.Error()
	}
	return m
}

func fromYAMLArray(str string) []interface{} {
	a := []interface{}{}
	if err := yaml.Unmarshal([]byte(str), &a); err != nil {
		a = []interface{}{err.Error()}
	}
	return a
}

func toJSON(v interface{}) string {
	data, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(data)
}

func fromJSON(str string) map[string]interface{} {
	m := map[string]interface{}{}
	if err := json.Unmarshal([]byte(str), &m); err != nil {
		m["Error"] = err.Error()
	}
	return m
}

func fromJSONArray(str string) []interface{} {
	a := []interface{}{}
	if err := json.Unmarshal([]byte(str), &a); err != nil {
		a = []interface{}{err.Error()}
	}
	return a
}

// Helm marks messages of fail and required so that the execution error can be cleaned up.
const warnStart, warnEnd = "HELM_ERR_START", "HELM_ERR_END"

func warnWrap(msg string) string { return warnStart + msg + warnEnd }

var execErrRe = regexp.MustCompile(`^template: (\S+?): executing .*` + warnStart + `(?s:(.*))` + warnEnd)

// cleanupExecError turns a fail/required error into Helm's "execution error at (FILE:L:C): MSG".
func cleanupExecError(filename string, err error) error {
	if m := execErrRe.FindStringSubmatch(err.Error()); m != nil {
		return fmt.Errorf("execution error at (%s): %s", m[1], m[2])
	}
	return fmt.Errorf("%s: %w", filename, err)
}

type engine struct {
	strict bool
}

func (e *engine) funcMap(t *template.Template, included map[string]int) template.FuncMap {
	f := sprig.TxtFuncMap()
	delete(f, "env")
	delete(f, "expandenv")
	f["toYaml"] = toYAML
	f["fromYaml"] = fromYAML
	f["fromYamlArray"] = fromYAMLArray
	f["toJson"] = toJSON
	f["fromJson"] = fromJSON
	f["fromJsonArray"] = fromJSONArray
	f["toToml"] = func(interface{}) (string, error) {
		return "", errors.New("toToml is not implemented by helm-render")
	}
	f["lookup"] = func(string, string, string, string) (map[string]interface{}, error) {
		return map[string]interface{}{}, nil
	}
	f["required"] = func(warn string, val interface{}) (interface{}, error) {
		if val == nil {
			return val, errors.New(warnWrap(warn))
		} else if s, ok := val.(string); ok && s == "" {
			return val, errors.New(warnWrap(warn))
		}
		return val, nil
	}
	f["fail"] = func(msg string) (string, error) { return "", errors.New(warnWrap(msg)) }
	f["include"] = e.include(t, included)
	f["tpl"] = e.tpl(t, included)
	return f
}

func (e *engine) missingKey() string {
	if e.strict {
		return "missingkey=error"
	}
	return "missingkey=zero"
}

func (e *engine) include(t *template.Template, included map[string]int) func(string, interface{}) (string, error) {
	return func(name string, data interface{}) (string, error) {
		if included[name] > 1000 {
			return "", fmt.Errorf("rendering template has a nested reference name: %s: unable to execute template", name)
		}
		included[name]++
		defer func() { included[name]-- }()
		var buf strings.Builder
		err := t.ExecuteTemplate(&buf, name, data)
		return buf.String(), err
	}
}

func (e *engine) tpl(parent *template.Template, included map[string]int) func(string, interface{}) (string, error) {
	return func(text string, vals interface{}) (string, error) {
		t, err := parent.Clone()
		if err != nil {
			return "", fmt.Errorf("cannot clone template: %w", err)
		}
		t.Option(e.missingKey())
		t.Funcs(template.FuncMap{"include": e.include(t, included), "tpl": e.tpl(t, included)})
		t, err = t.New(parent.Name()).Parse(text)
		if err != nil {
			return "", fmt.Errorf("cannot parse template %q: %w", text, err)
		}
		var buf strings.Builder
		if err := t.Execute(&buf, vals); err != nil {
			return "", fmt.Errorf("error during tpl function execution for %q: %w", text, err)
		}
		return strings.ReplaceAll(buf.String(), "<no value>", ""), nil
	}
}

// ---- manifests -------------------------------------------------------------------------------

// Helm's releaseutil.InstallOrder.
var installOrder = []string{
	"PriorityClass", "Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange",
	"PodSecurityPolicy", "PodDisruptionBudget", "ServiceAccount", "Secret", "SecretList",
	"ConfigMap", "StorageClass", "PersistentVolume", "PersistentVolumeClaim",
	"CustomResourceDefinition", "ClusterRole", "ClusterRoleList", "ClusterRoleBinding",
	"ClusterRoleBindingList", "Role", "RoleList", "RoleBinding", "RoleBindingList", "Service",
	"DaemonSet", "Pod", "ReplicationController", "ReplicaSet", "Deployment",
	"HorizontalPodAutoscaler", "StatefulSet", "Job", "CronJob", "IngressClass", "Ingress",
	"APIService",
}

var manifestSep = regexp.MustCompile("(?:^|\\s*\n)---\\s*")

var dns1123Subdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

type manifest struct {
	source  string
	index   int
	kind    string
	content string
}

// checkManifest parses one document strictly and checks what every Kubernetes object needs.
func checkManifest(source, content string) (string, error) {
	var strict interface{}
	if err := yamlv2.UnmarshalStrict([]byte(content), &strict); err != nil {
		return "", fmt.Errorf("YAML parse error on %s: %v", source, err)
	}
	var head map[string]interface{}
	if err := yaml.Unmarshal([]byte(content), &head); err != nil {
		return "", fmt.Errorf("YAML parse error on %s: %v", source, err)
	}
	if head == nil { // only comments
		return "", nil
	}
	kind, _ := head["kind"].(string)
	apiVersion, _ := head["apiVersion"].(string)
	if kind == "" || apiVersion == "" {
		return "", fmt.Errorf("%s: object without apiVersion or kind", source)
	}
	meta, _ := head["metadata"].(map[string]interface{})
	name, _ := meta["name"].(string)
	if len(name) > 253 || !dns1123Subdomain.MatchString(name) {
		return "", fmt.Errorf("%s: %s metadata.name %q is not a DNS-1123 subdomain", source, kind, name)
	}
	return kind, nil
}

// ---- main ------------------------------------------------------------------------------------

type options struct {
	release, chartDir, namespace, kubeVersion string
	valueFiles, sets, setStrings, apiVersions []string
	strict, notes                             bool
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: helm-render [-n NAMESPACE] [-f VALUES.yaml]... [--set K=V]... "+
		"[--set-string K=V]... [--kube-version V] [--api-versions G/V]... [--strict] [--notes] "+
		"RELEASE CHART_DIR")
	os.Exit(2)
}

func parseArgs(args []string) options {
	o := options{namespace: "default", kubeVersion: "v1.31.0"}
	var positional []string
	for i := 0; i < len(args); i++ {
		arg := args[i]
		name, value, hasValue := arg, "", false
		if strings.HasPrefix(arg, "--") && strings.Contains(arg, "=") {
			name, value, hasValue = arg[:strings.Index(arg, "=")], arg[strings.Index(arg, "=")+1:], true
		}
		next := func() string {
			if hasValue {
				return value
			}
			if i+1 >= len(args) {
				usage()
			}
			i++
			return args[i]
		}
		switch name {
		case "-n", "--namespace":
			o.namespace = next()
		case "-f", "--values":
			o.valueFiles = append(o.valueFiles, next())
		case "--set":
			o.sets = append(o.sets, next())
		case "--set-string":
			o.setStrings = append(o.setStrings, next())
		case "--kube-version":
			o.kubeVersion = next()
		case "-a", "--api-versions":
			o.apiVersions = append(o.apiVersions, next())
		case "--strict":
			o.strict = true
		case "--notes":
			o.notes = true
		case "-h", "--help":
			usage()
		default:
			if strings.HasPrefix(arg, "-") {
				fmt.Fprintf(os.Stderr, "helm-render: unknown flag %s\n", arg)
				usage()
			}
			positional = append(positional, arg)
		}
	}
	if len(positional) != 2 {
		usage()
	}
	o.release, o.chartDir = positional[0], positional[1]
	return o
}

func loadChart(dir string) (*Metadata, map[string]interface{}, []byte, error) {
	data, err := os.ReadFile(filepath.Join(dir, "Chart.yaml"))
	if err != nil {
		return nil, nil, nil, err
	}
	md := &Metadata{}
	if err := yaml.Unmarshal(data, md); err != nil {
		return nil, nil, nil, fmt.Errorf("Chart.yaml: %v", err)
	}
	if md.APIVersion != "v2" && md.APIVersion != "v1" {
		return nil, nil, nil, fmt.Errorf("Chart.yaml: apiVersion %q is not v1 or v2", md.APIVersion)
	}
	if md.Name == "" {
		return nil, nil, nil, errors.New("Chart.yaml: name is required")
	}
	if _, err := semver.StrictNewVersion(md.Version); err != nil {
		return nil, nil, nil, fmt.Errorf("Chart.yaml: version %q is not SemVer 2: %v", md.Version, err)
	}
	if md.Type != "" && md.Type != "application" && md.Type != "library" {
		return nil, nil, nil, fmt.Errorf("Chart.yaml: type %q is not application or library", md.Type)
	}
	defaults := map[string]interface{}{}
	if data, err := os.ReadFile(filepath.Join(dir, "values.yaml")); err == nil {
		if defaults, err = readValues(data); err != nil {
			return nil, nil, nil, fmt.Errorf("values.yaml: %v", err)
		}
	}
	schema, err := os.ReadFile(filepath.Join(dir, "values.schema.json"))
	if err != nil && !os.IsNotExist(err) {
		return nil, nil, nil, err
	}
	return md, defaults, schema, nil
}

func render(o options) (string, string, error) {
	md, defaults, schema, err := loadChart(o.chartDir)
	if err != nil {
		return "", "", err
	}

	// User values: -f files merged in order, then --set, then --set-string.
	user := map[string]interface{}{}
	for _, f := range o.valueFiles {
		data, err := os.ReadFile(f)
		if err != nil {
			return "", "", err
		}
		vals, err := readValues(data)
		if err != nil {
			return "", "", fmt.Errorf("failed to parse %s: %v", f, err)
		}
		user = mergeMaps(user, vals)
	}
	for _, s := range o.sets {
		if err := parseSet(s, user, false); err != nil {
			return "", "", fmt.Errorf("failed parsing --set data: %v", err)
		}
	}
	for _, s := range o.setStrings {
		if err := parseSet(s, user, true); err != nil {
			return "", "", fmt.Errorf("failed parsing --set-string data: %v", err)
		}
	}
	values := deepCopy(user).(map[string]interface{})
	coalesce(values, deepCopy(defaults).(map[string]interface{}), "", func(msg string) {
		fmt.Fprintln(os.Stderr, "coalesce.go: warning:", msg)
	})
	if schema != nil {
		if err := validateSchema(md.Name, values, schema); err != nil {
			return "", "", err
		}
	}

	kv, err := semver.NewVersion(o.kubeVersion)
	if err != nil {
		return "", "", fmt.Errorf("--kube-version %q: %v", o.kubeVersion, err)
	}
	caps := &Capabilities{
		KubeVersion: KubeVersion{Version: "v" + kv.String(), Major: strconv.FormatUint(kv.Major(), 10),
			Minor: strconv.FormatUint(kv.Minor(), 10)},
		APIVersions: append(append(VersionSet{}, defaultAPIVersions...), o.apiVersions...),
		HelmVersion: HelmVersion{Version: "v3"},
	}

	// Templates and .Files.
	templates := map[string]string{}
	files := Files{}
	err = filepath.Walk(o.chartDir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(o.chartDir, p)
		rel = filepath.ToSlash(rel)
		if info.IsDir() {
			if rel == "charts" {
				return fmt.Errorf("subcharts (charts/) are not supported by helm-render")
			}
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		switch {
		case strings.HasPrefix(rel, "templates/"):
			templates[path.Join(md.Name, rel)] = string(data)
		case rel == "Chart.yaml" || rel == "values.yaml" || rel == "values.schema.json" ||
			rel == "Chart.lock" || rel == "requirements.yaml" || rel == ".helmignore":
		default:
			files[rel] = data
		}
		return nil
	})
	if err != nil {
		return "", "", err
	}
	names := make([]string, 0, len(templates))
	for name := range templates {
		names = append(names, name)
	}
	sort.Strings(names)

	e := &engine{strict: o.strict}
	t := template.New("gotpl")
	t.Option(e.missingKey())
	t.Funcs(e.funcMap(t, map[string]int{}))
	for _, name := range names {
		if _, err := t.New(name).Parse(templates[name]); err != nil {
			return "", "", fmt.Errorf("parse error in %s: %v", name, err)
		}
	}
	top := map[string]interface{}{
		"Chart":        md,
		"Capabilities": caps,
		"Release": map[string]interface{}{
			"Name": o.release, "Namespace": o.namespace, "Revision": 1, "Service": "Helm",
			"IsUpgrade": false, "IsInstall": true,
		},
		"Files":  files,
		"Values": values,
	}

	var manifests []manifest
	notes := ""
	for _, name := range names {
		if strings.HasPrefix(path.Base(name), "_") {
			continue
		}
		vals := map[string]interface{}{}
		for k, v := range top {
			vals[k] = v
		}
		vals["Template"] = map[string]interface{}{"Name": name, "BasePath": path.Join(md.Name, "templates")}
		var buf strings.Builder
		if err := t.ExecuteTemplate(&buf, name, vals); err != nil {
			return "", "", cleanupExecError(name, err)
		}
		out := strings.ReplaceAll(buf.String(), "<no value>", "")
		if name == path.Join(md.Name, "templates", "NOTES.txt") {
			notes = out
			continue
		}
		if strings.HasSuffix(name, "NOTES.txt") || strings.TrimSpace(out) == "" {
			continue
		}
		for i, doc := range manifestSep.Split(strings.TrimSpace(out), -1) {
			doc = strings.TrimSpace(doc)
			if doc == "" {
				continue
			}
			kind, err := checkManifest(name, doc)
			if err != nil {
				return "", "", err
			}
			manifests = append(manifests, manifest{source: name, index: i, kind: kind, content: doc})
		}
	}

	rank := func(kind string) int {
		for i, k := range installOrder {
			if k == kind {
				return i
			}
		}
		return len(installOrder)
	}
	sort.SliceStable(manifests, func(i, j int) bool {
		a, b := manifests[i], manifests[j]
		if ra, rb := rank(a.kind), rank(b.kind); ra != rb {
			return ra < rb
		}
		if a.kind != b.kind {
			return a.kind < b.kind
		}
		if a.source != b.source {
			return a.source < b.source
		}
		return a.index < b.index
	})
	var sb strings.Builder
	for _, m := range manifests {
		fmt.Fprintf(&sb, "---\n# Source: %s\n%s\n", m.source, m.content)
	}
	return sb.String(), notes, nil
}

func main() {
	o := parseArgs(os.Args[1:])
	out, notes, err := render(o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "Error: %v\n", err)
		os.Exit(1)
	}
	fmt.Print(out)
	if o.notes && strings.TrimSpace(notes) != "" {
		fmt.Printf("\nNOTES:\n%s\n", notes)
	}
}
