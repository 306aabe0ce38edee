{{/* The name of the chart's objects: the release name, unless it already contains "packrat". */}}
{{- define "packrat.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Labels on every object of the release. */}}
{{- define "packrat.commonLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/part-of: packrat
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{/* Labels of the agent's objects: the common ones plus what identifies the agent. */}}
{{- define "packrat.labels" -}}
{{ include "packrat.commonLabels" . }}
app.kubernetes.io/name: packrat
app.kubernetes.io/component: agent
{{- end -}}

{{/* Selector labels of the agent pods. */}}
{{- define "packrat.selectorLabels" -}}
app.kubernetes.io/name: packrat
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: agent
{{- end -}}

{{/* The container image. */}}
{{- define "packrat.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
