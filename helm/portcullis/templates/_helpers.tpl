{{/*
portcullis.name is the chart name, or nameOverride.
*/}}
{{- define "portcullis.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
portcullis.fullname names the release's resources: fullnameOverride, or
RELEASE-NAME unless the release name already contains the name.
*/}}
{{- define "portcullis.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
portcullis.chart is "name-version", for the helm.sh/chart label.
*/}}
{{- define "portcullis.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
portcullis.selectorLabels select the release's pods. They never change
between chart versions (a Deployment's selector is immutable).
*/}}
{{- define "portcullis.selectorLabels" -}}
app.kubernetes.io/name: {{ include "portcullis.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: server
{{- end }}

{{/*
portcullis.labels go on every resource of the server.
*/}}
{{- define "portcullis.labels" -}}
{{ include "portcullis.selectorLabels" . }}
{{ include "portcullis.commonLabels" . }}
{{- end }}

{{/*
portcullis.commonLabels go on every resource, the `helm test` pod included,
besides its selector labels.
*/}}
{{- define "portcullis.commonLabels" -}}
helm.sh/chart: {{ include "portcullis.chart" . }}
app.kubernetes.io/version: {{ include "portcullis.imageTag" . | trunc 63 | trimSuffix "-" | quote }}
app.kubernetes.io/part-of: portcullis
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
portcullis.serviceAccountName is the ServiceAccount the pods run as.
*/}}
{{- define "portcullis.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "portcullis.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "portcullis.imageTag" -}}
{{- default .Chart.AppVersion .Values.image.tag }}
{{- end }}

{{/*
portcullis.image is repository:tag, or repository@digest when a digest is set.
*/}}
{{- define "portcullis.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (include "portcullis.imageTag" .) }}
{{- end }}
{{- end }}

{{/* Where the pod mounts what the config file points at. */}}
{{- define "portcullis.configDir" -}}/etc/portcullis{{- end }}
{{- define "portcullis.requestStateDir" -}}/etc/portcullis/request-state{{- end }}
{{- define "portcullis.introspectionDir" -}}/etc/portcullis/introspection{{- end }}
{{- define "portcullis.redisTLSDir" -}}/etc/portcullis/redis-tls{{- end }}
{{- define "portcullis.authServerKeysDir" -}}/etc/portcullis/authorization-server-keys{{- end }}
{{- define "portcullis.authServerIdPDir" -}}/etc/portcullis/authorization-server-idp{{- end }}
{{- define "portcullis.connectionsDir" -}}/etc/portcullis/connections{{- end }}

{{/*
portcullis.redisCA is "true" when the chart mounts a CA for Redis's TLS
(redis.tls.enabled with redis.tls.caSecret).
*/}}
{{- define "portcullis.redisCA" -}}
{{- if and .Values.redis.tls.enabled .Values.redis.tls.caSecret }}true{{ end }}
{{- end }}

{{/*
portcullis.redisEnabled is "true" when the values name a Redis: one server
(redis.url), a Sentinel deployment or a Cluster.
*/}}
{{- define "portcullis.redisEnabled" -}}
{{- if or .Values.redis.url .Values.redis.sentinel.masterName .Values.redis.cluster.addresses }}true{{ end }}
{{- end }}

{{/* The container ports; the config file makes the server listen on them. */}}
{{- define "portcullis.httpPort" -}}8080{{- end }}
{{- define "portcullis.metricsPort" -}}9090{{- end }}

{{/*
portcullis.authEnabled is "true" when an issuer or introspection is
configured, or the authorization server (whose issuer /mcp trusts).
*/}}
{{- define "portcullis.authEnabled" -}}
{{- $auth := .Values.config.auth | default dict }}
{{- if or $auth.issuers (dig "introspection" "url" "" $auth) (include "portcullis.authServerEnabled" .) }}true{{ end }}
{{- end }}

{{/*
portcullis.authServerEnabled is "true" when config.authorization_server.enabled is.
*/}}
{{- define "portcullis.authServerEnabled" -}}
{{- if dig "authorization_server" "enabled" false .Values.config }}true{{ end }}
{{- end }}

{{/*
portcullis.connectionsEnabled is "true" when an upstream of config.upstreams
has oauth.grant authorization_code: users connect their own accounts there,
whose tokens the vault seals with the keys of the connections values.
*/}}
{{- define "portcullis.connectionsEnabled" -}}
{{- range (.Values.config.upstreams | default list) }}
{{- if eq (dig "oauth" "grant" "" .) "authorization_code" }}true{{ break }}{{ end }}
{{- end }}
{{- end }}

{{/*
portcullis.introspectionEnabled is "true" when config.auth.introspection.url is set.
*/}}
{{- define "portcullis.introspectionEnabled" -}}
{{- if dig "auth" "introspection" "url" "" .Values.config }}true{{ end }}
{{- end }}

{{/*
portcullis.secretName is the Secret holding the request-state keys (and the
introspection client secret unless it has its own existing Secret).
*/}}
{{- define "portcullis.secretName" -}}
{{- default (include "portcullis.fullname" .) .Values.requestState.existingSecret }}
{{- end }}

{{/*
portcullis.chartSecretNeeded is "true" when the chart creates its own Secret.
*/}}
{{- define "portcullis.chartSecretNeeded" -}}
{{- if or (not .Values.requestState.existingSecret) (and (include "portcullis.introspectionEnabled" .) (not .Values.introspection.existingSecret)) (and (include "portcullis.authServerEnabled" .) (not .Values.authorizationServer.idp.existingSecret)) (and (include "portcullis.connectionsEnabled" .) (not .Values.connections.existingSecret)) }}true{{ end }}
{{- end }}

{{/*
portcullis.seconds converts a Go duration made of h, m and s parts ("1m30s")
to whole seconds. values.schema.json only allows that form for the keys
passed here.
*/}}
{{- define "portcullis.seconds" -}}
{{- $d := toString . }}
{{- $h := regexFind "[0-9]+h" $d | trimSuffix "h" | default "0" | atoi }}
{{- $m := regexFind "[0-9]+m" $d | trimSuffix "m" | default "0" | atoi }}
{{- $s := regexFind "[0-9]+s" $d | trimSuffix "s" | default "0" | atoi }}
{{- add (mul $h 3600) (mul $m 60) $s }}
{{- end }}

{{/*
portcullis.config is the configuration file: config from the values, plus
the keys the chart owns (listen addresses and the mounted secret files).
*/}}
{{- define "portcullis.config" -}}
{{- $cfg := deepCopy (.Values.config | default dict) }}
{{- $server := merge (dict "listen" (printf "0.0.0.0:%s" (include "portcullis.httpPort" .)) "metrics_listen" (printf "0.0.0.0:%s" (include "portcullis.metricsPort" .))) ($cfg.server | default dict) }}
{{- $_ := set $cfg "server" $server }}
{{- $mcp := $cfg.mcp | default dict }}
{{- $rs := $mcp.request_state | default dict }}
{{- $_ := set $rs "keys_file" (printf "%s/keys" (include "portcullis.requestStateDir" .)) }}
{{- $_ := set $mcp "request_state" $rs }}
{{- $_ := set $cfg "mcp" $mcp }}
{{- if include "portcullis.introspectionEnabled" . }}
{{- $_ := set $cfg.auth.introspection "client_secret_file" (printf "%s/client-secret" (include "portcullis.introspectionDir" .)) }}
{{- end }}
{{- if include "portcullis.authServerEnabled" . }}
{{- $as := $cfg.authorization_server }}
{{- if .Values.authorizationServer.keys.existingSecret }}
{{- $_ := set $as "keys_file" (printf "%s/keys.json" (include "portcullis.authServerKeysDir" .)) }}
{{- end }}
{{- $idp := $as.idp | default dict }}
{{- $_ := set $idp "client_secret_file" (printf "%s/client-secret" (include "portcullis.authServerIdPDir" .)) }}
{{- $_ := set $as "idp" $idp }}
{{- end }}
{{- if include "portcullis.connectionsEnabled" . }}
{{- $conns := $cfg.connections | default dict }}
{{- $_ := set $conns "keys_file" (printf "%s/keys" (include "portcullis.connectionsDir" .)) }}
{{- $_ := set $cfg "connections" $conns }}
{{- end }}
{{- if include "portcullis.redisEnabled" . }}
{{- $redis := $cfg.redis | default dict }}
{{- $tls := $redis.tls | default dict }}
{{- if .Values.redis.url }}
{{- $_ := set $redis "url" .Values.redis.url }}
{{- else if .Values.redis.sentinel.masterName }}
{{- $_ := set $redis "sentinel" (dict "master_name" .Values.redis.sentinel.masterName "addresses" .Values.redis.sentinel.addresses) }}
{{- else }}
{{- $_ := set $redis "cluster" (dict "addresses" .Values.redis.cluster.addresses) }}
{{- end }}
{{- if and .Values.redis.tls.enabled (not .Values.redis.url) }}
{{- $_ := set $tls "enabled" true }}
{{- end }}
{{- if include "portcullis.redisCA" . }}
{{- $_ := set $tls "ca_file" (printf "%s/ca.crt" (include "portcullis.redisTLSDir" .)) }}
{{- end }}
{{- if $tls }}
{{- $_ := set $redis "tls" $tls }}
{{- end }}
{{- $_ := set $cfg "redis" $redis }}
{{- end }}
{{- toYaml $cfg }}
{{- end }}

{{/*
portcullis.validate fails the render on a configuration that cannot work,
naming the values key to change.
*/}}
{{- define "portcullis.validate" -}}
{{- $auth := .Values.config.auth | default dict }}
{{- if not (include "portcullis.authEnabled" .) }}
{{- if not $auth.insecure_allow_unauthenticated }}
{{- fail "config.auth: no issuers and no introspection are configured, so /mcp would accept calls from anyone. Set config.auth.resource and config.auth.issuers (see docs/kubernetes.md), or set config.auth.insecure_allow_unauthenticated=true to run without authentication (never in production)." }}
{{- end }}
{{- else if not $auth.resource }}
{{- fail "config.auth.resource: required when auth is on: the public URL of the MCP endpoint, e.g. https://mcp.example.com/mcp" }}
{{- else if ne (urlParse $auth.resource).path "/mcp" }}
{{- fail (printf "config.auth.resource: %q must name the served MCP endpoint, whose path is /mcp" $auth.resource) }}
{{- end }}
{{- if and (include "portcullis.introspectionEnabled" .) (not .Values.introspection.clientSecret) (not .Values.introspection.existingSecret) }}
{{- fail "introspection: config.auth.introspection.url is set, so set introspection.existingSecret (or introspection.clientSecret) to the client secret Portcullis authenticates with" }}
{{- end }}
{{- if include "portcullis.authServerEnabled" . }}
{{- $as := .Values.authorizationServer }}
{{- if and (not $as.idp.clientSecret) (not $as.idp.existingSecret) }}
{{- fail "authorizationServer.idp: config.authorization_server.enabled is true, so set authorizationServer.idp.existingSecret (or authorizationServer.idp.clientSecret) to Portcullis's client secret at the identity provider" }}
{{- end }}
{{- if or (gt (int .Values.replicaCount) 1) .Values.autoscaling.enabled }}
{{- if not $as.keys.existingSecret }}
{{- fail "authorizationServer.keys.existingSecret: required with more than one replica or autoscaling: without it each pod signs with a key of its own, and a token issued by one pod is refused by the others (docs/authorization-server.md, \"Signing keys\")" }}
{{- end }}
{{- if not (include "portcullis.redisEnabled" .) }}
{{- fail "redis: the authorization server keeps sign-ins, codes and refresh tokens in Redis when there is more than one replica or autoscaling; without it each pod knows only its own: set redis.url, redis.sentinel or redis.cluster (docs/authorization-server.md, \"Replicas and Redis\")" }}
{{- end }}
{{- end }}
{{- end }}
{{- if and (include "portcullis.connectionsEnabled" .) (not (include "portcullis.authServerEnabled" .)) (not (dig "connections" "sign_in" "issuer" "" .Values.config)) }}
{{- fail "config.authorization_server.enabled: an upstream of config.upstreams uses oauth.grant authorization_code, whose connect page signs users in through Portcullis's authorization server: enable it, or set config.connections.sign_in (docs/connected-accounts.md)" }}
{{- end }}
{{- $redis := .Values.redis }}
{{- $named := list }}
{{- if $redis.url }}{{ $named = append $named "redis.url" }}{{ end }}
{{- if $redis.sentinel.masterName }}{{ $named = append $named "redis.sentinel.masterName" }}{{ end }}
{{- if $redis.cluster.addresses }}{{ $named = append $named "redis.cluster.addresses" }}{{ end }}
{{- if gt (len $named) 1 }}
{{- fail (printf "redis: %s are set together; name one server (redis.url), a Sentinel deployment (redis.sentinel) or a Cluster (redis.cluster)" (join ", " $named)) }}
{{- end }}
{{- if and $redis.sentinel.masterName (not $redis.sentinel.addresses) }}
{{- fail "redis.sentinel.addresses: empty; list the sentinels as host:port" }}
{{- end }}
{{- if and (not $redis.sentinel.masterName) (or $redis.sentinel.addresses $redis.sentinel.existingSecret) }}
{{- fail "redis.sentinel.masterName: empty, but other redis.sentinel values are set; name the primary the sentinels monitor" }}
{{- end }}
{{- if and (not (include "portcullis.redisEnabled" .)) (or $redis.existingSecret $redis.tls.enabled) }}
{{- fail "redis: existingSecret or tls is set but no Redis is named; set redis.url, redis.sentinel or redis.cluster" }}
{{- end }}
{{- if and $redis.tls.enabled $redis.url (not (hasPrefix "rediss://" $redis.url)) }}
{{- fail (printf "redis.tls.enabled: redis.url %q must start with rediss:// to connect over TLS" $redis.url) }}
{{- end }}
{{- $server := .Values.config.server | default dict }}
{{- $drain := include "portcullis.seconds" ($server.drain_delay | default "5s") | atoi }}
{{- $grace := include "portcullis.seconds" ($server.shutdown_grace | default "20s") | atoi }}
{{- if le (int .Values.terminationGracePeriodSeconds) (add $drain $grace) }}
{{- fail (printf "terminationGracePeriodSeconds: %d must exceed config.server.drain_delay (%ds) + config.server.shutdown_grace (%ds) = %ds, or Kubernetes kills pods while calls are still finishing" (int .Values.terminationGracePeriodSeconds) $drain $grace (add $drain $grace)) }}
{{- end }}
{{- if and .Values.autoscaling.enabled .Values.autoscaling.targetCPUUtilizationPercentage (not (dig "requests" "cpu" "" (.Values.resources | default dict))) }}
{{- fail "autoscaling.targetCPUUtilizationPercentage: needs resources.requests.cpu (utilization is a percentage of the request); set it, or set the target to 0" }}
{{- end }}
{{- if and .Values.autoscaling.enabled .Values.autoscaling.targetMemoryUtilizationPercentage (not (dig "requests" "memory" "" (.Values.resources | default dict))) }}
{{- fail "autoscaling.targetMemoryUtilizationPercentage: needs resources.requests.memory; set it, or set the target to 0" }}
{{- end }}
{{- if and .Values.autoscaling.enabled (not .Values.autoscaling.targetCPUUtilizationPercentage) (not .Values.autoscaling.targetMemoryUtilizationPercentage) }}
{{- fail "autoscaling: set targetCPUUtilizationPercentage or targetMemoryUtilizationPercentage" }}
{{- end }}
{{- $pdb := .Values.podDisruptionBudget }}
{{- if $pdb.enabled }}
{{- $replicas := ternary .Values.autoscaling.minReplicas .Values.replicaCount .Values.autoscaling.enabled | int }}
{{- if eq (toString $pdb.maxUnavailable) "0" }}
{{- fail "podDisruptionBudget.maxUnavailable: 0 lets no pod be evicted, so node drains would hang" }}
{{- else if and (eq (toString $pdb.maxUnavailable) "") (regexMatch "^[0-9]+$" (toString $pdb.minAvailable)) (ge (int $pdb.minAvailable) $replicas) }}
{{- fail (printf "podDisruptionBudget.minAvailable: %d with %d replica(s) lets no pod be evicted, so node drains would hang: run more replicas (replicaCount or autoscaling.minReplicas) or lower it" (int $pdb.minAvailable) $replicas) }}
{{- end }}
{{- end }}
{{- if and .Values.autoscaling.enabled (gt (int .Values.autoscaling.minReplicas) (int .Values.autoscaling.maxReplicas)) }}
{{- fail "autoscaling.minReplicas: must not exceed autoscaling.maxReplicas" }}
{{- end }}
{{- end }}

{{/*
portcullis.unroutedPaths lists, one per line, the paths of the virtual
servers (config.servers) and of their Protected Resource Metadata
(/.well-known/oauth-protected-resource followed by the server's path) that
none of .paths routes: [{path, pathType}], a pathType of Prefix (the
default) routing the path and everything under it element by element, as
Ingress and HTTPRoute prefixes do, and any other only the path itself.
.root is the chart's context.
*/}}
{{- define "portcullis.unroutedPaths" -}}
{{- $listed := .paths }}
{{- range (.root.Values.config.servers | default list) }}
{{- range $want := list .path (printf "/.well-known/oauth-protected-resource%s" .path) }}
{{- $routed := false }}
{{- range $listed }}
{{- $path := .path | default "/" }}
{{- if eq (.pathType | default "Prefix") "Prefix" }}
{{- $base := trimSuffix "/" $path }}
{{- if or (eq $base "") (eq $want $base) (hasPrefix (printf "%s/" $base) $want) }}{{ $routed = true }}{{ end }}
{{- else if eq $path $want }}{{ $routed = true }}
{{- end }}
{{- end }}
{{- if not $routed }}
{{ $want }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/*
portcullis.unroutedRootPaths lists, one per line as "TYPE PATH" (TYPE an
HTTPRoute path match type, Exact or PathPrefix), the paths of the root
server's Protected Resource Metadata (/.well-known/oauth-protected-resource,
bare and followed by the path of config.auth.resource), with
config.authorization_server.enabled of the authorization server's metadata
and endpoints (/oauth), and with an upstream of oauth.grant
authorization_code of the connect pages (/connections), that .prefix, a
path prefix matched element by element, does not route. .root is the
chart's context.
*/}}
{{- define "portcullis.unroutedRootPaths" -}}
{{- $cfg := .root.Values.config }}
{{- $want := list }}
{{- with (dig "auth" "resource" "" $cfg) }}
{{- $want = append $want "Exact /.well-known/oauth-protected-resource" }}
{{- $path := trimSuffix "/" (urlParse .).path }}
{{- if $path }}
{{- $want = append $want (printf "Exact /.well-known/oauth-protected-resource%s" $path) }}
{{- end }}
{{- end }}
{{- if include "portcullis.authServerEnabled" .root }}
{{- $want = concat $want (list "Exact /.well-known/oauth-authorization-server" "Exact /.well-known/openid-configuration" "PathPrefix /oauth") }}
{{- end }}
{{- if include "portcullis.connectionsEnabled" .root }}
{{- $want = append $want "PathPrefix /connections" }}
{{- end }}
{{- $base := trimSuffix "/" .prefix }}
{{- range $want }}
{{- $path := index (splitList " " .) 1 }}
{{- if not (or (eq $base "") (eq $path $base) (hasPrefix (printf "%s/" $base) $path)) }}
{{ . }}
{{- end }}
{{- end }}
{{- end }}
