{{/* The chart's name (nameOverride) and the prefix of every object's name (fullnameOverride;
else the release name, with the chart's name appended unless it already holds it: release
"prewarm" gives prewarm-tick, release "team-b" team-b-prewarm-tick). */}}
{{- define "prewarm.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "prewarm.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := include "prewarm.name" . }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Labels of every object but app.kubernetes.io/name (objects with a name of their own, such
as balloon pods, set it themselves). */}}
{{- define "prewarm.commonLabels" -}}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: prewarm
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{/* Labels on every object of the chart (the Kubernetes recommended set). */}}
{{- define "prewarm.labels" -}}
app.kubernetes.io/name: {{ include "prewarm.name" . }}
{{ include "prewarm.commonLabels" . }}
{{- end }}

{{/* The PriorityClass of balloon pods and of every drain's replacement placeholder: per release
(<fullname>-balloon, so two releases never share or delete each other's), unless
balloon.priorityClassName names one. The stack's BalloonPriorityClass must be this name. */}}
{{- define "prewarm.priorityClassName" -}}
{{- .Values.balloon.priorityClassName | default (printf "%s-balloon" (include "prewarm.fullname" .)) -}}
{{- end }}

{{/* The targets as the binary reads them: every field but the chart-only `chart`. */}}
{{- define "prewarm.targetSpecs" -}}
{{- $out := list }}
{{- range .Values.targets }}
{{- $out = append $out (omit . "chart") }}
{{- end }}
{{- toJson $out }}
{{- end }}

{{/* The pre-delete hook's ServiceAccount as one more subject of the restore bindings, when the
hook is on (templates/restore-hook.yaml). Argument: (list $root $fn). */}}
{{- define "prewarm.restoreHookSubject" -}}
{{- $root := index . 0 }}
{{- if and (eq (index . 1) "restore") $root.Values.restoreHook.image }}
  - kind: ServiceAccount
    name: {{ printf "%s-restore-hook" (include "prewarm.fullname" $root) }}
    namespace: {{ $root.Release.Namespace }}
{{- end }}
{{- end }}
