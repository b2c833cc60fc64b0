{{/* Names, labels and computed values shared by the chart's templates. */}}

{{- define "aoctl.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's objects are named after it, and after the chart unless the release says it. */}}
{{- define "aoctl.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "aoctl.headless" -}}
{{- printf "%s-headless" (include "aoctl.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "aoctl.selectorLabels" -}}
app.kubernetes.io/name: {{ include "aoctl.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "aoctl.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "aoctl.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: aoctl
{{- end -}}

{{- define "aoctl.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The Secret holding the bearer token, and its key. */}}
{{- define "aoctl.tokenSecret" -}}
{{- default (printf "%s-token" (include "aoctl.fullname" .)) .Values.token.existingSecret -}}
{{- end -}}

{{- define "aoctl.tokenKey" -}}
{{- if .Values.token.existingSecret -}}{{ .Values.token.existingSecretKey }}{{- else -}}token{{- end -}}
{{- end -}}

{{/* Where the pod keeps its data directory and reads the token. */}}
{{- define "aoctl.dataDir" -}}/var/lib/aoctl{{- end -}}
{{- define "aoctl.tokenDir" -}}/etc/aoctl/token{{- end -}}

{{/* The port `aoctl serve` listens on in the pod (its default port). */}}
{{- define "aoctl.containerPort" -}}7420{{- end -}}

{{/* The host names the API answers besides localhost and loopback IPs. */}}
{{- define "aoctl.allowedHosts" -}}
{{- $full := include "aoctl.fullname" . -}}
{{- $ns := .Release.Namespace -}}
{{- $domain := .Values.clusterDomain -}}
{{- $hosts := list "$(POD_IP)" $full (printf "%s.%s" $full $ns) (printf "%s.%s.svc" $full $ns) (printf "%s.%s.svc.%s" $full $ns $domain) -}}
{{- $hosts = append $hosts (printf "$(POD_NAME).%s.%s.svc.%s" (include "aoctl.headless" .) $ns $domain) -}}
{{- range .Values.allowedHosts -}}{{- $hosts = append $hosts . -}}{{- end -}}
{{- toJson $hosts -}}
{{- end -}}
