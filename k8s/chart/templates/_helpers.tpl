{{- define "slurmd-go.name" -}}{{ .Release.Name | trunc 50 | trimSuffix "-" }}{{- end -}}
{{- define "slurmd-go.labels" -}}
app.kubernetes.io/name: slurmd-go
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
{{- define "slurmd-go.conffile" -}}
{{- if .Values.config.file -}}{{ .Values.config.file }}
{{- else if .Values.config.hostPath -}}{{ .Values.config.hostPath }}/slurm.conf
{{- else -}}/etc/slurm/slurm.conf{{- end -}}
{{- end -}}
{{- /* cluster-scoped objects: one per namespace and release */ -}}
{{- define "slurmd-go.clusterName" -}}{{ printf "%s-%s" .Release.Namespace .Release.Name | trunc 63 | trimSuffix "-" }}{{- end -}}
{{- /* the topology controller's pod: not selected as a slurmd-go pod */ -}}
{{- define "slurmd-go.topologyLabels" -}}
app.kubernetes.io/name: slurmd-go-topology
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
