package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseSetTypesValuesAsHelm(t *testing.T) {
	got := map[string]interface{}{}
	for _, s := range []string{
		"a.b=1,a.c=true,a.d=null,a.e=0,a.f=007,a.g=x\\,y",
		"list={1,two},idx[1].name=n",
		"dots.kubernetes\\.io/name=v",
		"eq=a=b",
	} {
		if err := parseSet(s, got, false); err != nil {
			t.Fatal(err)
		}
	}
	if err := parseSet("s=1", got, true); err != nil {
		t.Fatal(err)
	}
	want := map[string]interface{}{
		"a": map[string]interface{}{
			"b": int64(1), "c": true, "d": nil, "e": int64(0), "f": "007", "g": "x,y",
		},
		"list": []interface{}{int64(1), "two"},
		"idx":  []interface{}{nil, map[string]interface{}{"name": "n"}},
		"dots": map[string]interface{}{"kubernetes.io/name": "v"},
		"eq":   "a=b",
		"s":    "1",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v\nwant %#v", got, want)
	}
	if err := parseSet("novalue", map[string]interface{}{}, false); err == nil {
		t.Fatal("a key without a value was accepted")
	}
}

func TestCoalesceKeepsUserValuesAndDropsNulls(t *testing.T) {
	user := map[string]interface{}{
		"a":    map[string]interface{}{"x": 1.0, "gone": nil},
		"drop": nil,
		"list": []interface{}{"u"},
	}
	defaults := map[string]interface{}{
		"a":     map[string]interface{}{"x": 2.0, "y": 3.0, "gone": 4.0},
		"drop":  map[string]interface{}{"k": 1.0},
		"list":  []interface{}{"d1", "d2"},
		"other": "d",
	}
	coalesce(user, defaults, "", func(msg string) { t.Log(msg) })
	want := map[string]interface{}{
		"a":     map[string]interface{}{"x": 1.0, "y": 3.0},
		"list":  []interface{}{"u"},
		"other": "d",
	}
	if !reflect.DeepEqual(user, want) {
		t.Fatalf("got %#v\nwant %#v", user, want)
	}
}

func writeChart(t *testing.T, files map[string]string) string {
	dir := t.TempDir()
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

var testChart = map[string]string{
	"Chart.yaml":  "apiVersion: v2\nname: demo\nversion: 1.2.3\nappVersion: \"9\"\n",
	"values.yaml": "name: x\nport: 8080\nlabels: {a: b}\ntext: '{{ .Values.name }}-t'\n",
	"values.schema.json": `{"type": "object", "properties": {"port": {"type": "integer",
	  "minimum": 1}}}`,
	"files/hello.txt":      "hi\n",
	"templates/_h.tpl":     `{{- define "demo.name" -}}{{ .Release.Name }}-{{ .Chart.Name }}{{- end -}}`,
	"templates/NOTES.txt":  "notes for {{ .Release.Name }}",
	"templates/empty.yaml": "{{- if false }}\nx: 1\n{{- end }}\n",
	"templates/cm.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ include "demo.name" . }}
  labels:
    {{- toYaml .Values.labels | nindent 4 }}
data:
  port: {{ .Values.port | quote }}
  tpl: {{ tpl .Values.text . | quote }}
  missing: "{{ .Values.nothing }}"
  file: {{ .Files.Get "files/hello.txt" | trim | quote }}
  template: {{ .Template.Name | quote }}
  kube: {{ .Capabilities.KubeVersion.Version | quote }}
  hasApps: {{ .Capabilities.APIVersions.Has "apps/v1" | quote }}
  lookup: {{ lookup "v1" "Secret" "ns" "n" | len | quote }}
  ns: {{ .Release.Namespace }}
---
apiVersion: v1
kind: Namespace
metadata:
  name: {{ required "name is required" .Values.name }}
`,
}

func TestRenderMatchesHelmTemplate(t *testing.T) {
	dir := writeChart(t, testChart)
	out, notes, err := render(options{release: "rel", chartDir: dir, namespace: "ns",
		kubeVersion: "v1.30.2", sets: []string{"labels.c=d"}})
	if err != nil {
		t.Fatal(err)
	}
	want := `---
# Source: demo/templates/cm.yaml
apiVersion: v1
kind: Namespace
metadata:
  name: x
---
# Source: demo/templates/cm.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: rel-demo
  labels:
    a: b
    c: d
data:
  port: "8080"
  tpl: "x-t"
  missing: ""
  file: "hi"
  template: "demo/templates/cm.yaml"
  kube: "v1.30.2"
  hasApps: "true"
  lookup: "0"
  ns: ns
`
	if out != want {
		t.Fatalf("got\n%s\nwant\n%s", out, want)
	}
	if notes != "notes for rel" {
		t.Fatalf("notes: %q", notes)
	}
}

func TestRenderFailures(t *testing.T) {
	for _, c := range []struct {
		sets  []string
		extra map[string]string
		want  string
	}{
		{sets: []string{"port=0"}, want: "port: Must be greater than or equal to 1"},
		{sets: []string{"name="}, want: "execution error at (demo/templates/cm.yaml:"},
		{extra: map[string]string{"templates/bad.yaml": "{{ fail \"no\" }}"},
			want: "execution error at (demo/templates/bad.yaml:1:3): no"},
		{extra: map[string]string{"templates/dup.yaml": "apiVersion: v1\nkind: A\nkind: B\n"},
			want: "YAML parse error on demo/templates/dup.yaml"},
		{extra: map[string]string{"templates/noname.yaml": "apiVersion: v1\nkind: A\n"},
			want: "is not a DNS-1123 subdomain"},
		{extra: map[string]string{"templates/parse.yaml": "{{ if }}"},
			want: "parse error in demo/templates/parse.yaml"},
	} {
		files := map[string]string{}
		for k, v := range testChart {
			files[k] = v
		}
		for k, v := range c.extra {
			files[k] = v
		}
		_, _, err := render(options{release: "rel", chartDir: writeChart(t, files),
			namespace: "ns", kubeVersion: "v1.31.0", sets: c.sets})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("sets %v, files %v: got error %v, want %q", c.sets, c.extra, err, c.want)
		}
	}
}
