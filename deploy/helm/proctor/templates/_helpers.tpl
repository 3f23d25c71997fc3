{{- define "proctor.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "proctor.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "proctor.selectorLabels" -}}
app.kubernetes.io/name: {{ include "proctor.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "proctor.labels" -}}
{{ include "proctor.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "proctor.image" -}}
{{- printf "%s:%s" .repository (.tag | default $.Chart.AppVersion) -}}
{{- end -}}

{{- define "proctor.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- .Values.serviceAccount.name | default (include "proctor.fullname" .) -}}
{{- else -}}
{{- .Values.serviceAccount.name | default "default" -}}
{{- end -}}
{{- end -}}

{{- define "proctor.secretName" -}}
{{- if .Values.secrets.create -}}
{{- include "proctor.fullname" . -}}
{{- else -}}
{{- required "secrets.existingSecret is required when secrets.create is false" .Values.secrets.existingSecret -}}
{{- end -}}
{{- end -}}

{{/* The settings every proctor container gets: the ConfigMap, and the Secret's values. */}}
{{- define "proctor.env" -}}
envFrom:
  - configMapRef:
      name: {{ include "proctor.fullname" . }}
env:
  - name: PROCTOR_DATABASE_URL
    valueFrom:
      secretKeyRef:
        name: {{ include "proctor.secretName" . }}
        key: database-url
  - name: PROCTOR_SIGNING_KEY
    valueFrom:
      secretKeyRef:
        name: {{ include "proctor.secretName" . }}
        key: signing-key
{{- if or .Values.secrets.secretsKeyset .Values.secrets.existingSecret }}
  - name: PROCTOR_SECRETS_KEY_FILE
    value: /etc/proctor/secrets-key.json
{{- end }}
{{- end -}}

{{- define "proctor.keysetVolume" -}}
{{- if or .Values.secrets.secretsKeyset .Values.secrets.existingSecret -}}
- name: secrets-keyset
  secret:
    secretName: {{ include "proctor.secretName" . }}
    items:
      - key: secrets-key.json
        path: secrets-key.json
{{- end }}
{{- end -}}

{{- define "proctor.keysetMount" -}}
{{- if or .Values.secrets.secretsKeyset .Values.secrets.existingSecret -}}
- name: secrets-keyset
  mountPath: /etc/proctor
  readOnly: true
{{- end }}
{{- end -}}
