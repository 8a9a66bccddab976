{{/* Names and labels. */}}
{{- define "pinledger.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "pinledger.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "pinledger.selectorLabels" -}}
app.kubernetes.io/name: {{ include "pinledger.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "pinledger.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "pinledger.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "pinledger.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{/*
How long a stop may take (values.yaml, shutdown), a = PINLEDGER_APPEND_TIMEOUT_S: the
preStop sleep; the drain of the calls in flight, 2a + 5 s (Config.forward_timeout_s);
the claims those calls started landing, 2a (Config.claim_append_s), during which the
owner's threads stop (their joins: 10 + 5 + 5 + 5 s at most); the margin, for leaving
the group and closing the log.
*/}}
{{- define "pinledger.terminationGracePeriodSeconds" -}}
{{- $s := .Values.shutdown -}}
{{- if $s.terminationGracePeriodSeconds -}}
{{- $s.terminationGracePeriodSeconds -}}
{{- else -}}
{{- $a := ceil .Values.server.appendTimeoutS -}}
{{- $drain := add (mul 2 $a) 5 -}}
{{- $land := max (mul 2 $a) 25 -}}
{{- add $s.preStopSleepSeconds $drain $land $s.marginSeconds -}}
{{- end -}}
{{- end -}}

{{/* The admin port's scheme: https with the Thrift certificate (docs/security.md). */}}
{{- define "pinledger.adminScheme" -}}
{{- if .Values.tls.existingSecret }}HTTPS{{ else }}HTTP{{ end -}}
{{- end -}}

{{/*
Settings that are secrets, or hold one (a DSN carries its password): never a plain
value, always by reference to a Secret (service/config.py, SECRETS).
*/}}
{{- define "pinledger.secretSettings" -}}
KAFKA_SASL_PASSWORD ADMIN_PASSWORD_HASH ADMIN_PASSWORD_SHA256 ADMIN_SALT METRICS_TOKEN STORE_DSN PG_DSN
{{- end -}}

{{/* Settings the chart sets itself, from the values named. */}}
{{- define "pinledger.chartSettings" -}}
{{- dict "HOST" "(always 0.0.0.0)" "ADVERTISE_HOST" "(the pod IP)" "PORT" "server.port" "ADMIN_PORT" "server.adminPort" "PROCESSES" "server.processes" "PEER_PORT" "server.peerPort" "APPEND_TIMEOUT_S" "server.appendTimeoutS" "KAFKA" "kafka.bootstrap" "TOPIC_PREFIX" "kafka.topicPrefix" "SCHEMA" "store.schema" "STORE_SHARDS" "store.shards" "QUEUE_CONFIG" "queueConfig" "KAFKA_SECURITY_PROTOCOL" "kafka.securityProtocol" "KAFKA_SASL_MECHANISM" "kafka.sasl.mechanism" "KAFKA_SASL_USERNAME" "kafka.sasl.username" "KAFKA_SSL_CAFILE" "kafka.tls" "KAFKA_SSL_CERTFILE" "kafka.tls" "KAFKA_SSL_KEYFILE" "kafka.tls" "KAFKA_SSL_CHECK_HOSTNAME" "kafka.tls.checkHostname" "TLS_CERTFILE" "tls" "TLS_KEYFILE" "tls" "TLS_CAFILE" "tls" "TLS_CLIENT_CAFILE" "tls.requireClientCertificates" "TLS_CHECK_HOSTNAME" "tls.checkHostname" | toJson -}}
{{- end -}}

{{/* Refuse values that cannot work, with what to do instead. */}}
{{- define "pinledger.validate" -}}
{{- $secret := splitList " " (include "pinledger.secretSettings" .) -}}
{{- $managed := include "pinledger.chartSettings" . | fromJson -}}
{{- range $name, $_ := .Values.server.settings -}}
{{- $key := upper ($name | trimPrefix "PINLEDGER_" | trimPrefix "pinledger_") -}}
{{- $base := $key | trimSuffix "_FILE" -}}
{{- if has $base $secret -}}
{{- fail (printf "server.settings.%s: a secret is never a value in the chart; create a Secret and name it (store.existingSecret, kafka.sasl.existingSecret, adminPassword.existingSecret, metricsToken.existingSecret)" $name) -}}
{{- end -}}
{{- if hasKey $managed $key -}}
{{- fail (printf "server.settings.%s: the chart sets PINLEDGER_%s itself; use %s" $name $key (get $managed $key)) -}}
{{- end -}}
{{- end -}}
{{- if not (or .Values.store.existingSecret .Values.store.shards.existingSecret) -}}
{{- fail "store.existingSecret (a Secret holding the store's DSN) or store.shards.existingSecret (the shard map) is needed" -}}
{{- end -}}
{{- if and .Values.kafka.sasl.mechanism (not .Values.kafka.sasl.existingSecret) -}}
{{- fail "kafka.sasl.mechanism is set: kafka.sasl.existingSecret must name the Secret holding the password" -}}
{{- end -}}
{{- if and .Values.tls.requireClientCertificates (not .Values.tls.existingSecret) -}}
{{- fail "tls.requireClientCertificates needs tls.existingSecret (its ca.crt signs the clients' certificates)" -}}
{{- end -}}
{{- if lt (int .Values.server.processes) 1 -}}
{{- fail "server.processes must be at least 1" -}}
{{- end -}}
{{- end -}}

{{/*
The store's settings and files, which the servers and the migrate Job share.
*/}}
{{- define "pinledger.storeEnv" -}}
{{- if .Values.store.existingSecret }}
- name: PINLEDGER_STORE_DSN
  valueFrom:
    secretKeyRef:
      name: {{ .Values.store.existingSecret }}
      key: {{ .Values.store.dsnKey }}
{{- end }}
- name: PINLEDGER_SCHEMA
  value: {{ .Values.store.schema | quote }}
{{- if .Values.store.shards.existingSecret }}
- name: PINLEDGER_STORE_SHARDS
  value: /etc/pinledger/shards/{{ .Values.store.shards.key }}
{{- end }}
# Nothing is written to the image (read-only root): no bytecode caches.
- name: PYTHONDONTWRITEBYTECODE
  value: "1"
{{- end -}}

{{- define "pinledger.storeVolumes" -}}
- name: tmp
  emptyDir:
    sizeLimit: 64Mi
{{- if .Values.store.shards.existingSecret }}
- name: shards
  secret:
    secretName: {{ .Values.store.shards.existingSecret }}
    defaultMode: 0440
{{- end }}
{{- with .Values.extraVolumes }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "pinledger.storeVolumeMounts" -}}
- name: tmp
  mountPath: /tmp
{{- if .Values.store.shards.existingSecret }}
# A directory, not subPath: an edited map is re-read by the servers.
- name: shards
  mountPath: /etc/pinledger/shards
  readOnly: true
{{- end }}
{{- with .Values.extraVolumeMounts }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "pinledger.podSecurity" -}}
{{- with .Values.serviceAccountName }}
serviceAccountName: {{ . }}
{{- end }}
automountServiceAccountToken: false
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
{{ toYaml . }}
{{- end }}
securityContext:
{{ toYaml .Values.podSecurityContext | indent 2 }}
{{- end -}}

{{/* How the servers reach Kafka: settings, and files from the Secrets named. */}}
{{- define "pinledger.kafkaEnv" -}}
- name: PINLEDGER_KAFKA_SECURITY_PROTOCOL
  value: {{ .Values.kafka.securityProtocol | quote }}
{{- with .Values.kafka.sasl }}
{{- if .mechanism }}
- name: PINLEDGER_KAFKA_SASL_MECHANISM
  value: {{ .mechanism | quote }}
- name: PINLEDGER_KAFKA_SASL_USERNAME
  value: {{ .username | quote }}
- name: PINLEDGER_KAFKA_SASL_PASSWORD_FILE
  value: /etc/pinledger/secrets/kafka-sasl/{{ .passwordKey }}
{{- end }}
{{- end }}
{{- with .Values.kafka.tls }}
{{- if .existingSecret }}
- name: PINLEDGER_KAFKA_SSL_CAFILE
  value: /etc/pinledger/kafka-tls/{{ .caKey }}
{{- if .certKey }}
- name: PINLEDGER_KAFKA_SSL_CERTFILE
  value: /etc/pinledger/kafka-tls/{{ .certKey }}
- name: PINLEDGER_KAFKA_SSL_KEYFILE
  value: /etc/pinledger/kafka-tls/{{ .keyKey }}
{{- end }}
- name: PINLEDGER_KAFKA_SSL_CHECK_HOSTNAME
  value: {{ .checkHostname | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{/*
The servers' Secrets, each mounted as a directory (read once at start: after
rotating one, `kubectl rollout restart`).
*/}}
{{- define "pinledger.secretMounts" -}}
{{- $mounts := list -}}
{{- if .Values.tls.existingSecret -}}
{{- $mounts = append $mounts (list "tls" .Values.tls.existingSecret "/etc/pinledger/tls") -}}
{{- end -}}
{{- if .Values.kafka.tls.existingSecret -}}
{{- $mounts = append $mounts (list "kafka-tls" .Values.kafka.tls.existingSecret "/etc/pinledger/kafka-tls") -}}
{{- end -}}
{{- if and .Values.kafka.sasl.mechanism .Values.kafka.sasl.existingSecret -}}
{{- $mounts = append $mounts (list "kafka-sasl" .Values.kafka.sasl.existingSecret "/etc/pinledger/secrets/kafka-sasl") -}}
{{- end -}}
{{- if .Values.adminPassword.existingSecret -}}
{{- $mounts = append $mounts (list "admin-password" .Values.adminPassword.existingSecret "/etc/pinledger/secrets/admin-password") -}}
{{- end -}}
{{- if .Values.metricsToken.existingSecret -}}
{{- $mounts = append $mounts (list "metrics-token" .Values.metricsToken.existingSecret "/etc/pinledger/secrets/metrics-token") -}}
{{- end -}}
{{- toJson $mounts -}}
{{- end -}}

{{- define "pinledger.secretVolumes" -}}
{{- range (include "pinledger.secretMounts" . | fromJsonArray) }}
- name: {{ index . 0 }}
  secret:
    secretName: {{ index . 1 }}
    defaultMode: 0440
{{- end }}
{{- end -}}

{{- define "pinledger.secretVolumeMounts" -}}
{{- range (include "pinledger.secretMounts" . | fromJsonArray) }}
- name: {{ index . 0 }}
  mountPath: {{ index . 2 }}
  readOnly: true
{{- end }}
{{- end -}}
