{{/* Labels on every object of the chart. */}}
{{- define "prewarm.labels" -}}
app.kubernetes.io/part-of: prewarm
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{/* The PriorityClass of balloon pods and of every drain's replacement placeholder: per release
(<release>-balloon, so two releases never share or delete each other's), unless
balloon.priorityClassName names one. The stack's BalloonPriorityClass must be this name. */}}
{{- define "prewarm.priorityClassName" -}}
{{- .Values.balloon.priorityClassName | default (printf "%s-balloon" .Release.Name) -}}
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
    name: {{ printf "%s-restore-hook" $root.Release.Name }}
    namespace: {{ $root.Release.Namespace }}
{{- end }}
{{- end }}
