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

{{/* The sidecar's image. */}}
{{- define "packrat.forwarderImage" -}}
{{ .Values.forwarderImage.repository }}:{{ .Values.forwarderImage.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* The agent's configuration: `config` plus what other values imply. */}}
{{- define "packrat.config" -}}
{{- $config := deepCopy .Values.config -}}
{{- $server := get $config "server" | default dict -}}
{{- if not .Values.cgroups.enabled }}
{{- $_ := set $server "cgroups" false -}}
{{- end }}
{{- if .Values.managementToken.enabled }}
{{- $_ := set $server "management_token_file" "/etc/packrat-token/token" -}}
{{- end }}
{{- if .Values.clientSharedMemory.hostPath }}
{{- $shm := get $server "shared_memory" | default dict -}}
{{- if kindIs "map" $shm }}
{{- $_ := set $shm "dir" "/run/packrat-shm" -}}
{{- $_ := set $server "shared_memory" $shm -}}
{{- end }}
{{- end }}
{{- $_ := set $config "server" $server -}}
{{- toYaml $config -}}
{{- end -}}

{{/* The ConfigMap the agents read. */}}
{{- define "packrat.configMapName" -}}
{{- if .Values.existingConfigMap.name -}}
{{- .Values.existingConfigMap.name -}}
{{- else -}}
{{- include "packrat.fullname" . }}-config
{{- end -}}
{{- end -}}

{{/* The Secret holding the management token. */}}
{{- define "packrat.tokenSecretName" -}}
{{- .Values.managementToken.existingSecret | default (printf "%s-management-token" (include "packrat.fullname" .)) -}}
{{- end -}}

{{/* true if an address "HOST:PORT" listens on loopback only. */}}
{{- define "packrat.isLoopback" -}}
{{- $host := regexReplaceAll ":[0-9]+$" (toString .) "" -}}
{{- or (hasPrefix "127." $host) (eq $host "localhost") (eq $host "[::1]") (eq $host "::1") -}}
{{- end -}}

{{/* "true" where config.server.grpc listens beyond loopback: the pod, the Service and the
NetworkPolicy then publish ports.grpc. */}}
{{- define "packrat.grpcPublished" -}}
{{- $server := .Values.config.server | default dict -}}
{{- $grpc := $server.grpc | default "127.0.0.1:8001" | toString -}}
{{- and (not .Values.existingConfigMap.name) (ne $grpc "off") (ne (include "packrat.isLoopback" $grpc) "true") -}}
{{- end -}}

{{/* Rules across values that the schema cannot express; rendering fails on a violation. */}}
{{- define "packrat.validate" -}}
{{- $v := .Values -}}
{{- if and $v.networkPolicy.managementFrom (not $v.managementToken.enabled) }}
{{- fail "networkPolicy.managementFrom needs managementToken.enabled" }}
{{- end }}
{{- if not $v.existingConfigMap.name }}
{{- $server := $v.config.server | default dict -}}
{{- $management := $server.management | default "127.0.0.1:8081" -}}
{{- if and (ne (include "packrat.isLoopback" $management) "true") (not $v.managementToken.enabled) }}
{{- fail (printf "config.server.management %s is not loopback: set managementToken.enabled=true, or keep it on 127.0.0.1 (reach it with kubectl port-forward)" $management) }}
{{- end }}
{{- if and (eq (include "packrat.grpcPublished" .) "true") (not $v.managementToken.enabled) }}
{{- fail (printf "config.server.grpc %s is not loopback: its repository calls (load, unload) change what this node serves, so set managementToken.enabled=true, or keep it on 127.0.0.1" $server.grpc) }}
{{- end }}
{{- if and $v.networkPolicy.managementFrom (eq (include "packrat.isLoopback" $management) "true") }}
{{- fail "networkPolicy.managementFrom admits pods to the management port, but config.server.management listens on loopback only" }}
{{- end }}
{{- range $name := list "http" "management" "metrics" "grpc" }}
{{- $address := index $server $name | default "" | toString }}
{{- if eq $address "off" }}{{- $address = "" }}{{- end }}
{{- if and $address (ne (regexFind "[0-9]+$" $address) (toString (index $v.ports $name))) }}
{{- fail (printf "config.server.%s (%s) and ports.%s (%v) differ" $name $address $name (index $v.ports $name)) }}
{{- end }}
{{- end }}
{{- if and $v.example.enabled (not $server.unix_socket) }}
{{- fail "example.enabled needs config.server.unix_socket" }}
{{- end }}
{{- $shutdown := $server.shutdown_timeout_s | default 30 | int64 }}
{{- if le (int64 $v.terminationGracePeriodSeconds) (add (int64 $v.preStopDelaySeconds) $shutdown) }}
{{- fail (printf "terminationGracePeriodSeconds (%v) must exceed preStopDelaySeconds (%v) + config.server.shutdown_timeout_s (%v)" $v.terminationGracePeriodSeconds $v.preStopDelaySeconds $shutdown) }}
{{- end }}
{{- end }}
{{- end -}}
