{{/* Labels on every object of the chart. */}}
{{- define "prewarm.labels" -}}
app.kubernetes.io/part-of: prewarm
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{/* The targets as the binary reads them: every field but the chart-only `chart`. */}}
{{- define "prewarm.targetSpecs" -}}
{{- $out := list }}
{{- range .Values.targets }}
{{- $out = append $out (omit . "chart") }}
{{- end }}
{{- toJson $out }}
{{- end }}
