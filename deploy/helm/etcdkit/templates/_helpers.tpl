{{- define "etcdkit.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "etcdkit.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "etcdkit.selector" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "etcdkit.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "etcdkit.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "etcdkit.tokenSecret" -}}
{{- default (printf "%s-api" (include "etcdkit.fullname" .)) .Values.api.tokenSecret -}}
{{- end -}}

{{/* The endpoints the sidecar is given: node mode defaults to the node's own member. */}}
{{- define "etcdkit.endpoints" -}}
{{- if .Values.etcd.endpoints -}}
{{- join "," .Values.etcd.endpoints -}}
{{- else if eq .Values.mode "node" -}}
https://127.0.0.1:2379
{{- else -}}
{{- fail "etcd.endpoints: give the client URLs of the cluster's members (mode external backs up a cluster it reaches there)" -}}
{{- end -}}
{{- end -}}

{{/* The variable that names the store's credential directory, from the URL's scheme. */}}
{{- define "etcdkit.credentialsVariable" -}}
{{- $c := .Values.store.credentials -}}
{{- if $c.variable -}}
{{- $c.variable -}}
{{- else if hasPrefix "s3://" .Values.store.url -}}
AWS_APPLICATION_CREDENTIALS
{{- else if hasPrefix "gs://" .Values.store.url -}}
GOOGLE_APPLICATION_CREDENTIALS
{{- else if hasPrefix "azblob://" .Values.store.url -}}
AZURE_APPLICATION_CREDENTIALS
{{- else if hasPrefix "swift://" .Values.store.url -}}
OPENSTACK_APPLICATION_CREDENTIALS
{{- else -}}
{{- fail (printf "store.credentials.variable: no credential variable is known for %s; name it" .Values.store.url) -}}
{{- end -}}
{{- end -}}

{{/* Whether the sidecar reads etcd's certificates, and where from. */}}
{{- define "etcdkit.tlsDir" -}}
{{- if .Values.etcd.tls.hostPKI.enabled -}}/etc/kubernetes/pki/etcd{{- else if .Values.etcd.tls.secretName -}}/var/run/etcdkit/etcd-tls{{- end -}}
{{- end -}}
