{{/*
fullname: every object is "<fullname>-<part>". With the release named kubejoule it is
"kubejoule", and the names are the kustomize tree's.
*/}}
{{- define "kubejoule.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The name of one part: (dict "root" $ "part" "agent") */}}
{{- define "kubejoule.name" -}}
{{- printf "%s-%s" (include "kubejoule.fullname" .root) .part -}}
{{- end -}}

{{/* Labels of every object: the kustomize tree's two, and Helm's. (dict "root" $ "part" "agent") */}}
{{- define "kubejoule.labels" -}}
app.kubernetes.io/name: {{ include "kubejoule.name" . }}
app.kubernetes.io/part-of: kubejoule
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* Labels of a workload and its pods: name, component, part-of (the selector is the name). */}}
{{- define "kubejoule.podLabels" -}}
app.kubernetes.io/name: {{ include "kubejoule.name" . }}
app.kubernetes.io/component: {{ .part }}
app.kubernetes.io/part-of: kubejoule
{{- end -}}

{{- define "kubejoule.workloadLabels" -}}
{{ include "kubejoule.labels" . }}
app.kubernetes.io/component: {{ .part }}
{{- end -}}

{{- define "kubejoule.selector" -}}
app.kubernetes.io/name: {{ include "kubejoule.name" . }}
{{- end -}}

{{- define "kubejoule.agentImage" -}}
{{ .Values.images.agent.repository }}:{{ .Values.images.agent.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "kubejoule.schedulerImage" -}}
{{ .Values.images.scheduler.repository }}:{{ .Values.images.scheduler.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* Whether anything reads the scheduler ConfigMap. */}}
{{- define "kubejoule.schedulerConfigNeeded" -}}
{{- $s := .Values.scheduler -}}
{{- if or $s.standalone.enabled $s.extender.enabled $s.autoscalerExpander.enabled $s.rebalancer.enabled -}}true{{- end -}}
{{- end -}}

{{/* scheduler.yaml: the values' config, the mode and where the agents are. */}}
{{- define "kubejoule.schedulerConfig" -}}
{{- $config := deepCopy .Values.scheduler.config -}}
{{- $_ := set $config "mode" .Values.scheduler.mode -}}
{{- $telemetry := get $config "telemetry" | default dict -}}
{{- $agents := get $telemetry "agents" | default dict -}}
{{- $_ := set $agents "endpoint_slices" (dict "namespace" (include "kubejoule.agentNamespace" .) "service" (include "kubejoule.name" (dict "root" . "part" "agent")) "port" "metrics") -}}
{{- $_ := set $telemetry "agents" $agents -}}
{{- $_ := set $config "telemetry" $telemetry -}}
{{ toYaml $config }}
{{- end -}}

{{/* Pod template annotation: the pods roll when scheduler.yaml changes. */}}
{{- define "kubejoule.configChecksum" -}}
checksum/config: {{ include "kubejoule.schedulerConfig" . | sha256sum }}
{{- end -}}

{{/* The restricted pod securityContext of the scheduler's workloads. */}}
{{- define "kubejoule.schedulerPodSecurity" -}}
securityContext:
  runAsNonRoot: true
  runAsUser: 65532
  runAsGroup: 65532
  fsGroup: 65532
  seccompProfile:
    type: RuntimeDefault
{{- end -}}

{{- define "kubejoule.containerSecurity" -}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities:
    drop: ["ALL"]
{{- end -}}

{{- define "kubejoule.antiAffinity" -}}
affinity:
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector:
            matchLabels:
              app.kubernetes.io/name: {{ include "kubejoule.name" . }}
{{- end -}}

{{- define "kubejoule.pythonEnv" -}}
- name: PYTHONDONTWRITEBYTECODE
  value: "1"
- name: PYTHONUNBUFFERED
  value: "1"
{{- end -}}

{{- define "kubejoule.tmpVolume" -}}
- name: tmp
  emptyDir:
    medium: Memory
    sizeLimit: 16Mi
{{- end -}}

{{/* nodeSelector and tolerations of a workload: (dict "nodeSelector" … "tolerations" …) */}}
{{- define "kubejoule.placement" -}}
{{- with .nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* The agent's namespace: agent.namespace, or the release namespace when empty. */}}
{{- define "kubejoule.agentNamespace" -}}
{{- .Values.agent.namespace | default .Release.Namespace -}}
{{- end -}}
