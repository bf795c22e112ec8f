{{/* The prefix of every object: fullnameOverride, else the release name (with the chart name unless it already holds it). */}}
{{- define "traceprof.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if eq .Release.Name $name -}}
{{- .Release.Name -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Labels on every object. */}}
{{- define "traceprof.labels" -}}
app.kubernetes.io/part-of: traceprof
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The Secret with the control token. */}}
{{- define "traceprof.tokenSecret" -}}
{{- default (printf "%s-control-token" (include "traceprof.fullname" .)) .Values.controlAuth.existingSecret -}}
{{- end -}}

{{/* The Secret with the PostgreSQL conninfo of each role (docs/storage.md, "Roles"). */}}
{{- define "traceprof.dbSecret" -}}
{{- if .Values.postgresql.bundled.enabled -}}
{{- printf "%s-postgresql" (include "traceprof.fullname" .) -}}
{{- else -}}
{{- required "set postgresql.existingSecret (a Secret holding a libpq conninfo per role) or postgresql.bundled.enabled=true" .Values.postgresql.existingSecret -}}
{{- end -}}
{{- end -}}

{{/* Its keys: the agents log in as a writer, the controller as the controller role, migrations as the owner. */}}
{{- define "traceprof.dbKeyAgent" -}}
{{- if .Values.postgresql.bundled.enabled -}}writer{{- else -}}{{ .Values.postgresql.agentSecretKey }}{{- end -}}
{{- end -}}
{{- define "traceprof.dbKeyController" -}}
{{- if .Values.postgresql.bundled.enabled -}}controller{{- else -}}{{ .Values.postgresql.controllerSecretKey }}{{- end -}}
{{- end -}}
{{- define "traceprof.dbKeyOwner" -}}
{{- if .Values.postgresql.bundled.enabled -}}owner{{- else -}}{{ .Values.postgresql.ownerSecretKey }}{{- end -}}
{{- end -}}
