{{/*
The chart's name: the `app.kubernetes.io/name` label of every object (dms-operator).
*/}}
{{- define "dms-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The name of the release's objects: the release name when it already contains the chart's name
(`helm install dms-operator …` gives the manifests' names), else `<release>-<name>`.
*/}}
{{- define "dms-operator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := include "dms-operator.name" . }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Selector labels: the manifests' `app.kubernetes.io/name`, and the release, so that two releases
in one namespace never select each other's pods.
*/}}
{{- define "dms-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "dms-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
Labels of every object but the CRDs: the manifests' `app.kubernetes.io/name` and Helm's.
*/}}
{{- define "dms-operator.labels" -}}
app.kubernetes.io/name: {{ include "dms-operator.name" . }}
{{ include "dms-operator.helmLabels" . }}
{{- end }}

{{/*
Helm's standard labels and `commonLabels`: alone on the CRDs, which the manifests label with
nothing (a CRD belongs to no one install).
*/}}
{{- define "dms-operator.helmLabels" -}}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
`metadata.annotations` from `commonAnnotations` (and the annotations given as the dict's
"extra"), or nothing. Call with (dict "root" $ "extra" (dict …)).
*/}}
{{- define "dms-operator.annotations" -}}
{{- $all := merge (dict) (.extra | default (dict)) .root.Values.commonAnnotations }}
{{- with $all }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
The ServiceAccount's name.
*/}}
{{- define "dms-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "dms-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name: name the existing ServiceAccount to run as when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
"true" when the CRDs are part of this release: `crds.enabled`, or when unset (null), the
cluster-wide scope. Empty otherwise (templates test it with `if`).
*/}}
{{- define "dms-operator.crdsEnabled" -}}
{{- if kindIs "invalid" .Values.crds.enabled }}
{{- if eq .Values.scope "cluster" }}true{{ end }}
{{- else if .Values.crds.enabled }}true
{{- end }}
{{- end }}

{{/*
An image reference from an image's values (repository, tag, digest) and the chart's: repository@digest
when a digest is given (the tag is then only informational, as with kustomize's `images:`), else
repository:tag (tag defaults to appVersion). With `global.imageRegistry`, the repository's registry
(its first part when that has a dot or a colon, or is localhost) is replaced by it. Call with
(dict "image" .Values.image "root" $).
*/}}
{{- define "dms-operator.imageRef" -}}
{{- $repository := .image.repository }}
{{- with .root.Values.global.imageRegistry }}
{{- $parts := splitList "/" $repository }}
{{- $first := first $parts }}
{{- if and (gt (len $parts) 1) (or (contains "." $first) (contains ":" $first) (eq "localhost" $first)) }}
{{- $repository = join "/" (rest $parts) }}
{{- end }}
{{- $repository = printf "%s/%s" (trimSuffix "/" .) $repository }}
{{- end }}
{{- if .image.digest }}
{{- printf "%s@%s" $repository .image.digest }}
{{- else }}
{{- printf "%s:%s" $repository (default .root.Chart.AppVersion .image.tag) }}
{{- end }}
{{- end }}

{{/*
The operator's image reference (see dms-operator.imageRef).
*/}}
{{- define "dms-operator.image" -}}
{{- include "dms-operator.imageRef" (dict "image" .Values.image "root" .) }}
{{- end }}

{{/*
The pods' imagePullSecrets: `global.imagePullSecrets`, then `imagePullSecrets`, each given as a
name or as {name: …}, without repeats; nothing when there are none.
*/}}
{{- define "dms-operator.imagePullSecrets" -}}
{{- $names := list }}
{{- range concat (.Values.global.imagePullSecrets | default list) (.Values.imagePullSecrets | default list) }}
{{- $name := "" }}
{{- if kindIs "string" . }}{{ $name = . }}{{ else if kindIs "map" . }}{{ $name = .name | default "" }}{{ end }}
{{- if and $name (not (has $name $names)) }}{{ $names = append $names $name }}{{ end }}
{{- end }}
{{- if $names }}
imagePullSecrets:
{{- range $names }}
  - name: {{ . }}
{{- end }}
{{- end }}
{{- end }}

{{/*
A value as the text of an environment variable: whole numbers without an exponent (values.yaml
numbers arrive as float64, which would print 1048576 as 1.048576e+06), lists joined by commas.
*/}}
{{- define "dms-operator.envText" -}}
{{- if kindIs "slice" . }}
{{- join "," . }}
{{- else if and (kindIs "float64" .) (eq (floor .) .) }}
{{- int64 . }}
{{- else }}
{{- toString . }}
{{- end }}
{{- end }}

{{/*
"true" when /metrics is served over HTTPS with authentication: `metrics.secure`, or when unset
(null), the cluster-wide scope. A namespace-scoped release's Role cannot grant the TokenReviews
and SubjectAccessReviews HTTPS metrics ask for, so it serves plain HTTP unless told otherwise
(as manifests/namespaced). Empty otherwise.
*/}}
{{- define "dms-operator.metricsSecure" -}}
{{- if kindIs "invalid" .Values.metrics.secure }}
{{- if eq .Values.scope "cluster" }}true{{ end }}
{{- else if .Values.metrics.secure }}true
{{- end }}
{{- end }}

{{/*
"true" when /metrics listens on the pod's loopback only: `metrics.loopbackOnly`, or when unset
(null), plain HTTP, which answers anyone who reaches it. Empty otherwise.
*/}}
{{- define "dms-operator.metricsLoopbackOnly" -}}
{{- if kindIs "invalid" .Values.metrics.loopbackOnly }}
{{- if not (include "dms-operator.metricsSecure" .) }}true{{ end }}
{{- else if .Values.metrics.loopbackOnly }}true
{{- end }}
{{- end }}

{{/*
The port of /metrics: `metrics.port`, or when unset (null) the operator's own default, 8443 over
HTTPS and 8080 in plain HTTP.
*/}}
{{- define "dms-operator.metricsPort" -}}
{{- if kindIs "invalid" .Values.metrics.port }}
{{- ternary "8443" "8080" (eq (include "dms-operator.metricsSecure" .) "true") }}
{{- else }}
{{- include "dms-operator.envText" .Values.metrics.port }}
{{- end }}
{{- end }}

{{/*
Where the metrics certificate Secret (`metrics.certSecret`) is mounted: `--metrics-cert-dir`.
*/}}
{{- define "dms-operator.metricsCertDir" -}}
/var/run/metrics-tls
{{- end }}

{{/*
Where the CA bundle (`caBundle`) is mounted; DMS_CA_FILE is the key's file in it.
*/}}
{{- define "dms-operator.caBundleDir" -}}
/etc/dms/ca
{{- end }}

{{/*
The CA of the default connection as the chart mounts it, from whichever of `caBundle` (PEM
text, kept in the ConfigMap <fullname>-ca), `caSecretRef` and `caConfigMapRef` is given, or from
chart 0.1.0's `caBundle: {secretName, configMapName, key}` (deprecated): a dict with kind
(secret, configMap), name, key and chartOwned ("true" for the chart's ConfigMap), as JSON; "{}"
when none is given.
*/}}
{{- define "dms-operator.ca" -}}
{{- $ca := dict }}
{{- $legacy := .Values.caBundle }}
{{- if kindIs "map" $legacy }}
{{- if $legacy.secretName }}
{{- $ca = dict "kind" "secret" "name" $legacy.secretName "key" ($legacy.key | default "ca.crt") }}
{{- else if $legacy.configMapName }}
{{- $ca = dict "kind" "configMap" "name" $legacy.configMapName "key" ($legacy.key | default "ca.crt") }}
{{- end }}
{{- else if .Values.caBundle }}
{{- $ca = dict "kind" "configMap" "name" (printf "%s-ca" (include "dms-operator.fullname" .)) "key" "ca.crt" "chartOwned" "true" }}
{{- else if .Values.caSecretRef.name }}
{{- $ca = dict "kind" "secret" "name" .Values.caSecretRef.name "key" .Values.caSecretRef.key }}
{{- else if .Values.caConfigMapRef.name }}
{{- $ca = dict "kind" "configMap" "name" .Values.caConfigMapRef.name "key" .Values.caConfigMapRef.key }}
{{- end }}
{{- toJson $ca }}
{{- end }}

{{/*
"true" when the deprecated spelling config.insecureSkipTlsVerify is given, else empty.
*/}}
{{- define "dms-operator.insecureSkipTLSVerify" -}}
{{- $new := .Values.config.insecureSkipTLSVerify }}
{{- $old := .Values.config.insecureSkipTlsVerify }}
{{- if not (kindIs "invalid" $new) }}{{ if $new }}true{{ end }}
{{- else if not (kindIs "invalid" $old) }}{{ if $old }}true{{ end }}
{{- end }}
{{- end }}

{{/*
Stakater Reloader's annotations on the Deployment (`reloader.enabled`): the Secrets and
ConfigMaps created outside the release that the operator reads at start.
*/}}
{{- define "dms-operator.reloaderAnnotations" -}}
{{- if .Values.reloader.enabled }}
{{- $ca := include "dms-operator.ca" . | fromJson }}
{{- $secrets := list }}
{{- if not (or .Values.credentials.create .Values.simulator.enabled) }}{{ $secrets = append $secrets .Values.credentials.name }}{{ end }}
{{- if and (eq ($ca.kind | default "") "secret") }}{{ $secrets = append $secrets $ca.name }}{{ end }}
{{- with $secrets }}
secret.reloader.stakater.com/reload: {{ join "," (uniq .) | quote }}
{{- end }}
{{- if and (eq ($ca.kind | default "") "configMap") (not $ca.chartOwned) }}
configmap.reloader.stakater.com/reload: {{ $ca.name | quote }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The Secret holding the token the ServiceMonitor scrapes with: the scraper's (created with the
release) or the one `metrics.serviceMonitor.scraper.tokenSecret.name` names.
*/}}
{{- define "dms-operator.scraperTokenSecret" -}}
{{- if .Values.metrics.serviceMonitor.scraper.create }}
{{- include "dms-operator.fullname" . }}-metrics-scraper-token
{{- else }}
{{- required "metrics.serviceMonitor.scraper.tokenSecret.name: name the Secret holding the token Prometheus scrapes with (its ServiceAccount bound to the metrics reader ClusterRole), or set metrics.serviceMonitor.scraper.create=true" .Values.metrics.serviceMonitor.scraper.tokenSecret.name }}
{{- end }}
{{- end }}

{{/*
Refuses combinations of values the operator could not run with, naming the value and the fix.
*/}}
{{- define "dms-operator.validate" -}}
{{- if and (eq .Values.scope "namespace") .Values.config.namespaces }}
{{- fail "config.namespaces: with scope: namespace the operator watches the release namespace only; leave config.namespaces empty, or use scope: cluster" }}
{{- end }}
{{- if and (eq .Values.scope "namespace") .Values.config.clusterConnections }}
{{- fail "config.clusterConnections: with scope: namespace the release's Role cannot grant ClusterServiceConnections nor the namespace labels they select by (the operator exits at start on the 403); leave config.clusterConnections unset, or use scope: cluster" }}
{{- end }}
{{- if and (eq .Values.scope "namespace") .Values.leaderElection.namespace (ne .Values.leaderElection.namespace .Release.Namespace) }}
{{- fail "leaderElection.namespace: with scope: namespace the Lease lives in the release namespace, where the Role grants it; leave leaderElection.namespace empty" }}
{{- end }}
{{- if and .Values.sharding.enabled (not .Values.leaderElection.enabled) }}
{{- fail "sharding.enabled: needs leaderElection.enabled (`run --sharded --no-leader-elect` exits at start: the elected leader assigns the resources to the replicas); set leaderElection.enabled=true, or sharding.enabled=false" }}
{{- end }}
{{- if and (not .Values.leaderElection.enabled) (gt (int .Values.replicas) 1) }}
{{- fail (printf "leaderElection.enabled=false with replicas: %d: without leader election every replica reconciles every resource, each writing to the service over the others; set replicas=1, or leaderElection.enabled=true (one replica leads, the others stand by)" (int .Values.replicas)) }}
{{- end }}
{{- if and (eq .Values.scope "namespace") .Values.sharding.enabled .Values.sharding.labelPolicy }}
{{- fail "sharding.labelPolicy: with scope: namespace the release cannot create the shard label policy, a cluster-scoped ValidatingAdmissionPolicy and its binding; set sharding.labelPolicy=false and either have a cluster admin install the policy (manifests/components/sharding/shard-label-policy.yaml, named in sharding.labelPolicyName) and let the operator's ServiceAccount get it and its binding, or set sharding.labelPolicyMode=unenforced (docs/guide/sharding.md, \"Label policy\"); or use scope: cluster" }}
{{- end }}
{{- if and (include "dms-operator.metricsLoopbackOnly" .) (or .Values.metrics.service.enabled .Values.metrics.serviceMonitor.enabled) }}
{{- fail "metrics.service.enabled, metrics.serviceMonitor.enabled: /metrics listens on the pod's loopback only (plain HTTP, metrics.secure false, reaches no Service); set metrics.secure=true (with scope: namespace a cluster admin binds system:auth-delegator to the operator's ServiceAccount, see the README) or, to serve plain HTTP to anyone who reaches the pod, metrics.loopbackOnly=false" }}
{{- end }}
{{- if and (include "dms-operator.metricsLoopbackOnly" .) .Values.metrics.prometheusRule.enabled }}
{{- fail "metrics.prometheusRule.enabled: the alerts read the series Prometheus scrapes from /metrics, which listens on the pod's loopback only (plain HTTP, metrics.secure false); set metrics.secure=true (with scope: namespace a cluster admin binds system:auth-delegator to the operator's ServiceAccount) and metrics.serviceMonitor.enabled=true" }}
{{- end }}
{{- if eq (include "dms-operator.metricsPort" .) (include "dms-operator.envText" .Values.healthProbes.port) }}
{{- fail "metrics.port: must differ from healthProbes.port; the chart gives /metrics a listener and a container port of its own" }}
{{- end }}
{{- if and .Values.metrics.certSecret (not (include "dms-operator.metricsSecure" .)) }}
{{- fail "metrics.certSecret: a certificate serves HTTPS metrics only; set metrics.secure=true or leave metrics.certSecret empty" }}
{{- end }}
{{- $caGiven := list }}
{{- if kindIs "map" .Values.caBundle }}
{{- if and .Values.caBundle.secretName .Values.caBundle.configMapName }}
{{- fail "caBundle.secretName, caBundle.configMapName: give one of them (better, in this chart's names: caSecretRef.name or caConfigMapRef.name)" }}
{{- end }}
{{- if or .Values.caBundle.secretName .Values.caBundle.configMapName }}{{ $caGiven = append $caGiven "caBundle" }}{{ end }}
{{- else if .Values.caBundle }}{{ $caGiven = append $caGiven "caBundle" }}
{{- end }}
{{- if .Values.caSecretRef.name }}{{ $caGiven = append $caGiven "caSecretRef.name" }}{{ end }}
{{- if .Values.caConfigMapRef.name }}{{ $caGiven = append $caGiven "caConfigMapRef.name" }}{{ end }}
{{- if gt (len $caGiven) 1 }}
{{- fail (printf "%s: give one of them: the CA's PEM text (caBundle), or the Secret (caSecretRef) or ConfigMap (caConfigMapRef) holding it" (join ", " $caGiven)) }}
{{- end }}
{{- if and (not (kindIs "invalid" .Values.config.insecureSkipTLSVerify)) (not (kindIs "invalid" .Values.config.insecureSkipTlsVerify)) }}
{{- fail "config.insecureSkipTLSVerify, config.insecureSkipTlsVerify: give config.insecureSkipTLSVerify only (config.insecureSkipTlsVerify is its deprecated spelling)" }}
{{- end }}
{{- if and .Values.simulator.enabled .Values.credentials.create }}
{{- fail "credentials.create, simulator.enabled: with the simulator the operator's default connection is the simulator's (the chart's Secret <fullname>-simulator-credentials); set credentials.create=false, or simulator.enabled=false to use the service" }}
{{- end }}
{{- if and $caGiven (include "dms-operator.insecureSkipTLSVerify" .) }}
{{- fail (printf "%s, config.insecureSkipTLSVerify: give one of them: a CA to verify the service's certificate with, or (a test service only) no verification" (first $caGiven)) }}
{{- end }}
{{- end }}

{{/*
The shard label policy a sharded replica requires at start: sharding.labelPolicyName, else the
chart's own (<fullname>-shard-labels).
*/}}
{{- define "dms-operator.shardLabelPolicyName" -}}
{{- .Values.sharding.labelPolicyName | default (printf "%s-shard-labels" (include "dms-operator.fullname" .)) -}}
{{- end -}}

{{/*
The simulator's objects (`simulator.enabled`, not for production): <fullname>-simulator.
*/}}
{{- define "dms-operator.simulatorName" -}}
{{- printf "%s-simulator" (include "dms-operator.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The simulator pod's selector labels: a name of its own, so that no selector of the operator's
pods (its Deployment's, the NetworkPolicy's, the PodDisruptionBudget's, `helm test`'s) takes it in.
*/}}
{{- define "dms-operator.simulatorSelectorLabels" -}}
app.kubernetes.io/name: {{ include "dms-operator.name" . }}-simulator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
Labels of the simulator's objects.
*/}}
{{- define "dms-operator.simulatorLabels" -}}
app.kubernetes.io/name: {{ include "dms-operator.name" . }}-simulator
app.kubernetes.io/component: simulator
{{ include "dms-operator.helmLabels" . }}
{{- end }}

{{/*
The Secret the operator reads its default connection from (base-url, api-key, tenant-id): the
chart's <fullname>-simulator-credentials with `simulator.enabled`, else `credentials.name`.
*/}}
{{- define "dms-operator.credentialsName" -}}
{{- if .Values.simulator.enabled }}
{{- printf "%s-credentials" (include "dms-operator.simulatorName" .) }}
{{- else }}
{{- .Values.credentials.name }}
{{- end }}
{{- end }}

{{/*
The simulator's Service URL: the base URL of the operator's default connection with
`simulator.enabled`.
*/}}
{{- define "dms-operator.simulatorUrl" -}}
{{- printf "http://%s.%s.svc:%s" (include "dms-operator.simulatorName" .) .Release.Namespace (include "dms-operator.envText" .Values.simulator.port) }}
{{- end }}
