{{/* Names: <release>-baobab unless the release name already says baobab. */}}
{{- define "baobab.fullname" -}}
{{- if contains "baobab" .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-baobab" .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "baobab.labels" -}}
app.kubernetes.io/name: baobab
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Selector labels of one component: include with (list $ "api"). */}}
{{- define "baobab.selector" -}}
{{- $root := index . 0 -}}
app.kubernetes.io/name: baobab
app.kubernetes.io/instance: {{ $root.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{/* Pod annotations that ask Prometheus to scrape GET /metrics on a port: include with (list $ 9101). */}}
{{- define "baobab.scrapeAnnotations" -}}
prometheus.io/scrape: "true"
prometheus.io/port: {{ index . 1 | quote }}
prometheus.io/path: /metrics
{{- end -}}

{{- define "baobab.secretName" -}}
{{- include "baobab.fullname" . }}-secrets
{{- end -}}

{{- define "baobab.apiUrl" -}}
http://{{ include "baobab.fullname" . }}-api:{{ .Values.api.service.port }}
{{- end -}}

{{/* The settings every Baobab container shares; secrets come from the chart's Secret. */}}
{{- define "baobab.brokerEnv" -}}
{{- if .Values.redis.enabled }}
- name: REDIS_PASSWORD
  valueFrom:
    secretKeyRef: {name: {{ include "baobab.secretName" . }}, key: redis-password}
- name: BAOBAB_BROKER_URL
  value: "redis://:$(REDIS_PASSWORD)@{{ include "baobab.fullname" . }}-redis:6379/0"
{{- else if .Values.externalRedis.existingSecret }}
- name: BAOBAB_BROKER_URL
  valueFrom:
    secretKeyRef: {name: {{ .Values.externalRedis.existingSecret }}, key: {{ .Values.externalRedis.existingSecretKey }}}
{{- else }}
- name: BAOBAB_BROKER_URL
  valueFrom:
    secretKeyRef: {name: {{ include "baobab.secretName" . }}, key: broker-url}
{{- end }}
{{- end -}}

{{- define "baobab.databaseEnv" -}}
{{- if .Values.postgresql.enabled }}
- name: POSTGRES_PASSWORD
  valueFrom:
    secretKeyRef: {name: {{ include "baobab.secretName" . }}, key: postgres-password}
- name: BAOBAB_DATABASE_URL
  value: "postgresql+psycopg2://{{ .Values.postgresql.user }}:$(POSTGRES_PASSWORD)@{{ include "baobab.fullname" . }}-postgresql:5432/{{ .Values.postgresql.database }}"
{{- else if .Values.externalDatabase.existingSecret }}
- name: BAOBAB_DATABASE_URL
  valueFrom:
    secretKeyRef: {name: {{ .Values.externalDatabase.existingSecret }}, key: {{ .Values.externalDatabase.existingSecretKey }}}
{{- else }}
- name: BAOBAB_DATABASE_URL
  valueFrom:
    secretKeyRef: {name: {{ include "baobab.secretName" . }}, key: database-url}
{{- end }}
{{- end -}}

{{- define "baobab.commonEnv" -}}
- name: BAOBAB_MODE
  value: production
- name: BAOBAB_HOME
  value: {{ .Values.home | quote }}
- name: BAOBAB_EXECUTOR
  value: {{ .Values.executor | quote }}
- name: BAOBAB_ARTIFACTS_URL
  value: {{ .Values.artifacts.url | default .Values.artifacts.mountPath | quote }}
{{- include "baobab.brokerEnv" . }}
{{- range $name, $value := .Values.extraEnv }}
- name: {{ $name }}
  value: {{ $value | quote }}
{{- end }}
{{- end -}}

{{- define "baobab.secretKeyEnv" -}}
- name: BAOBAB_SECRET_KEY
  valueFrom:
    secretKeyRef: {name: {{ include "baobab.secretName" . }}, key: secret-key}
{{- end -}}

{{- define "baobab.artifactsVolumeMount" -}}
{{- if not .Values.artifacts.url -}}
- name: artifacts
  mountPath: {{ .Values.artifacts.mountPath }}
{{- end }}
{{- end -}}

{{- define "baobab.artifactsVolume" -}}
{{- if not .Values.artifacts.url -}}
- name: artifacts
  persistentVolumeClaim:
    claimName: {{ .Values.artifacts.persistence.existingClaim | default (printf "%s-artifacts" (include "baobab.fullname" .)) }}
{{- end }}
{{- end -}}

{{/* The only places a Baobab container writes besides the artifacts: its root filesystem is read-only. */}}
{{- define "baobab.writableMounts" -}}
- {name: tmp, mountPath: /tmp}
- {name: home, mountPath: {{ .Values.home }}}
{{- end -}}

{{- define "baobab.writableVolumes" -}}
- {name: tmp, emptyDir: {}}
- {name: home, emptyDir: {}}
{{- end -}}

{{- define "baobab.podCommon" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- end -}}
