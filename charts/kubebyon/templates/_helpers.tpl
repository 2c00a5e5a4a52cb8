{{/* Names and labels. */}}
{{- define "kubebyon.name" -}}kubebyon{{- end -}}
{{- define "kubebyon.serviceAccount" -}}kubebyon-console{{- end -}}
{{- define "kubebyon.labels" -}}
app.kubernetes.io/name: kubebyon
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}
{{- define "kubebyon.selector" -}}
app.kubernetes.io/name: kubebyon
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
{{- define "kubebyon.platformKeyNamespace" -}}
{{- .Values.config.KUBEBYON_PLATFORM_KEY_NAMESPACE | default "kubebyon-platform-key" -}}
{{- end -}}

{{/* A memory quantity (Ki, Mi, Gi, K, M, G or bytes) in MiB, rounded down. */}}
{{- define "kubebyon.mib" -}}
{{- $q := toString . -}}
{{- if hasSuffix "Gi" $q -}}{{ mul (trimSuffix "Gi" $q | int) 1024 }}
{{- else if hasSuffix "Mi" $q -}}{{ trimSuffix "Mi" $q | int }}
{{- else if hasSuffix "Ki" $q -}}{{ div (trimSuffix "Ki" $q | int) 1024 }}
{{- else if hasSuffix "G" $q -}}{{ div (mul (trimSuffix "G" $q | int) 1000000000) 1048576 }}
{{- else if hasSuffix "M" $q -}}{{ div (mul (trimSuffix "M" $q | int) 1000000) 1048576 }}
{{- else if hasSuffix "K" $q -}}{{ div (mul (trimSuffix "K" $q | int) 1000) 1048576 }}
{{- else -}}{{ div ($q | int64) 1048576 }}
{{- end -}}
{{- end -}}

{{/*
Misconfigurations refused when the chart is rendered, each naming the key
and the fix (one failing case each in tests/fail/).
*/}}
{{- define "kubebyon.validate" -}}
{{- $url := .Values.config.KUBEBYON_PUBLIC_URL | default "" -}}
{{- if not (hasPrefix "https://" $url) -}}
{{- fail (printf "config.KUBEBYON_PUBLIC_URL is %q: set the https:// URL users reach the console at (session cookies are Secure only over https; put TLS in front with ingress.tlsSecret or your own proxy)" $url) -}}
{{- end -}}
{{- if not (has .Values.database.type (list "postgres" "sqlite")) -}}
{{- fail (printf "database.type is %q: use postgres (DATABASE_URL in existingSecret) or sqlite (one replica)" .Values.database.type) -}}
{{- end -}}
{{- if and (eq .Values.database.type "sqlite") (gt (int .Values.replicaCount) 1) -}}
{{- fail (printf "replicaCount is %d with database.type sqlite: one SQLite file serves one replica; set replicaCount: 1, or database.type: postgres for more" (int .Values.replicaCount)) -}}
{{- end -}}
{{- if and .Values.ingress.enabled (not .Values.config.KUBEBYON_TRUSTED_PROXIES) -}}
{{- fail "ingress.enabled is true but config.KUBEBYON_TRUSTED_PROXIES is empty: behind an ingress every client looks like the ingress controller, and a few wrong passwords from anyone lock an account for everyone; set it to the ingress controller's pod CIDR (k3s: 10.42.0.0/16)" -}}
{{- end -}}
{{- if and .Values.ingress.enabled (not .Values.ingress.host) -}}
{{- fail "ingress.enabled is true but ingress.host is empty: set the host name of config.KUBEBYON_PUBLIC_URL" -}}
{{- end -}}
{{- $hashing := .Values.config.KUBEBYON_PASSWORD_MEMORY_MIB | default "38" | int -}}
{{- $limit := dig "limits" "memory" "" .Values.resources -}}
{{- if $limit -}}
{{- $mib := include "kubebyon.mib" $limit | int -}}
{{- if lt $mib (add $hashing 128) -}}
{{- fail (printf "resources.limits.memory is %s (%d MiB): password hashing may take config.KUBEBYON_PASSWORD_MEMORY_MIB = %d MiB at once on top of the console's ~128 MiB; raise the limit to at least %dMi or lower KUBEBYON_PASSWORD_MEMORY_MIB" (toString $limit) $mib $hashing (add $hashing 128)) -}}
{{- end -}}
{{- end -}}
{{/* At install (lookup reads the cluster; `helm template` skips it): the URL
is read, never printed. */}}
{{- if eq .Values.database.type "postgres" -}}
{{- $secret := lookup "v1" "Secret" .Release.Namespace .Values.existingSecret -}}
{{- if $secret -}}
{{- $url := index ($secret.data | default dict) "DATABASE_URL" | default "" | b64dec -}}
{{- if not $url -}}
{{- fail (printf "existingSecret %s has no DATABASE_URL: add the PostgreSQL URL (postgres://…?sslmode=verify-full), or set database.type: sqlite" .Values.existingSecret) -}}
{{- else if and (not (regexMatch "[?&]sslmode=verify-(full|ca)(&|$)" $url)) (not .Values.database.allowUnverifiedTls) -}}
{{- fail (printf "DATABASE_URL in existingSecret %s does not verify the server (no sslmode=verify-full): add it (and sslrootcert= for a private CA), or set database.allowUnverifiedTls: true for a database on a trusted network" .Values.existingSecret) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- range $key := list "DATABASE_URL" "KUBEBYON_ADMIN_PASSWORD" "KUBEBYON_METRICS_TOKEN" "KUBEBYON_OIDC_CLIENT_SECRET" -}}
{{- if hasKey $.Values.config $key -}}
{{- fail (printf "config.%s is a secret: put it in the Secret named by existingSecret (%s), never in values" $key $.Values.existingSecret) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Cluster-scoped objects carry the release's namespace: two installations may share a host. */}}
{{- define "kubebyon.clusterName" -}}kubebyon-console-{{ .Release.Namespace }}{{- end -}}
