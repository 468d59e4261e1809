{{/* Names ---------------------------------------------------------------- */}}

{{- define "haptic.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's full name: resource names start with it (max 63 - "-controller"). */}}
{{- define "haptic.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "haptic.controller.fullname" -}}
{{- printf "%s-controller" (include "haptic.fullname" .) }}
{{- end }}

{{- define "haptic.haproxy.fullname" -}}
{{- printf "%s-haproxy" (include "haptic.fullname" .) }}
{{- end }}

{{- define "haptic.leaseName" -}}
{{- include "haptic.controller.fullname" . }}
{{- end }}

{{- define "haptic.controller.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "haptic.controller.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "haptic.agentTokenSecretName" -}}
{{- default (printf "%s-agent-token" (include "haptic.fullname" .)) .Values.agent.token.existingSecret }}
{{- end }}

{{/* Labels --------------------------------------------------------------- */}}

{{- define "haptic.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "haptic.labels" -}}
helm.sh/chart: {{ include "haptic.chart" . }}
app.kubernetes.io/name: {{ include "haptic.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Selector labels of one component: (dict "root" $ "component" "controller") */}}
{{- define "haptic.selectorLabels" -}}
app.kubernetes.io/name: {{ include "haptic.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "haptic.componentLabels" -}}
{{ include "haptic.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* The controller's --proxy-selector: the HAProxy pods of this release. */}}
{{- define "haptic.proxySelector" -}}
{{- printf "app.kubernetes.io/name=%s,app.kubernetes.io/instance=%s,app.kubernetes.io/component=haproxy" (include "haptic.name" .) .Release.Name }}
{{- end }}

{{- define "haptic.image" -}}
{{- $repo := .Values.image.repository }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" $repo .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" $repo (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* Libraries ------------------------------------------------------------ */}}

{{- define "haptic.libs" -}}
{{- .Values.controller.templateLibraries | default dict | toYaml }}
{{- end }}

{{/* "true" when the named library (camelCase) is enabled; a library without
     an `enabled` key is enabled, as the controller treats it. */}}
{{- define "haptic.libEnabled" -}}
{{- $libs := .root.Values.controller.templateLibraries | default dict }}
{{- $lib := get $libs .name }}
{{- if kindIs "map" $lib }}
{{- if hasKey $lib "enabled" }}{{ $lib.enabled }}{{ else }}true{{ end }}
{{- else }}true{{ end }}
{{- end }}

{{- define "haptic.gateEnabled" -}}
{{- $kb := get (.Values.controller.templateLibraries | default dict) "kubernetesBackends" | default dict }}
{{- $gate := get $kb "podReadinessGate" | default dict }}
{{- if and (kindIs "map" $gate) (eq (toString (get $gate "enabled")) "true") }}true{{ else }}false{{ end }}
{{- end }}

{{/* "true" when the ingress library terminates TLS. */}}
{{- define "haptic.tlsEnabled" -}}
{{- $ingress := get (.Values.controller.templateLibraries | default dict) "ingress" | default dict }}
{{- $tls := get $ingress "tls" | default dict }}
{{- if and (eq (include "haptic.libEnabled" (dict "root" . "name" "ingress")) "true") (ne (toString (get $tls "enabled")) "false") }}true{{ else }}false{{ end }}
{{- end }}

{{/* The Secret of the chart's own default certificate; empty when values name one. */}}
{{- define "haptic.defaultCertificateSecret" -}}
{{- $ingress := get (.Values.controller.templateLibraries | default dict) "ingress" | default dict }}
{{- $tls := get $ingress "tls" | default dict }}
{{- $default := get $tls "defaultCertificate" | default dict }}
{{- if and (eq (include "haptic.tlsEnabled" .) "true") (not (get $default "secret")) }}
{{- printf "%s-default-certificate" (include "haptic.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{/* The file given to --values: the whole templateLibraries tree, naming
     the chart's default certificate Secret when values name none. */}}
{{- define "haptic.valuesFile" -}}
{{- $libs := deepCopy (.Values.controller.templateLibraries | default dict) }}
{{- with include "haptic.defaultCertificateSecret" . }}
{{- $ingress := get $libs "ingress" | default dict }}
{{- $tls := get $ingress "tls" | default dict }}
{{- $_ := set $tls "defaultCertificate" (dict "secret" (printf "%s/%s" $.Release.Namespace .)) }}
{{- $_ := set $ingress "tls" $tls }}
{{- $_ := set $libs "ingress" $ingress }}
{{- end }}
{{- /* The ingress library publishes the chart's HAProxy Service's address
     unless values name another Service, or "none" */}}
{{- $ingressLib := get $libs "ingress" | default dict }}
{{- if kindIs "map" $ingressLib }}
{{- $published := toString (get $ingressLib "publishedService" | default "") }}
{{- if eq $published "" }}
{{- $_ := set $ingressLib "publishedService" (printf "%s/%s" $.Release.Namespace (include "haptic.haproxy.fullname" $)) }}
{{- else if eq $published "none" }}
{{- $_ := set $ingressLib "publishedService" "" }}
{{- end }}
{{- $_ := set $libs "ingress" $ingressLib }}
{{- end }}
{{- /* HTTP/3 is advertised on the port clients reach: the Service's HTTPS port */}}
{{- $base := get $libs "base" | default dict }}
{{- if kindIs "map" $base }}
{{- $http3 := get $base "http3" | default dict }}
{{- if and (kindIs "map" $http3) (not (get $http3 "advertisedPort")) }}
{{- $_ := set $http3 "advertisedPort" (int (.Values.haproxy.service.httpsPort | default 443)) }}
{{- $_ := set $base "http3" $http3 }}
{{- $_ := set $libs "base" $base }}
{{- end }}
{{- end }}
{{- $gateway := get $libs "gatewayApi" | default dict }}
{{- if and (kindIs "map" $gateway) $gateway.enabled }}
{{- $service := get $gateway "service" | default dict }}
{{- if not (get $service "selector") }}
{{- $_ := set $service "selector" (include "haptic.selectorLabels" (dict "root" $ "component" "haproxy") | fromYaml) }}
{{- end }}
{{- /* A Service selects pods of its own namespace only: the Gateways' Services
     (in the Gateways' namespaces) get an EndpointSlice of these pods instead */}}
{{- if not (get $service "podNamespace") }}
{{- $_ := set $service "podNamespace" $.Release.Namespace }}
{{- end }}
{{- $_ := set $gateway "service" $service }}
{{- end }}
templateLibraries:
{{- if $libs }}
{{ toYaml $libs | indent 2 }}
{{- else }} {}
{{- end }}
{{- with (.Values.controller.directivePolicy | default dict).allow }}
directivePolicy:
  allow:
{{ toYaml . | indent 4 }}
{{- end }}
{{- end }}

{{/* The port at the end of a raw HAProxy bind (":8080", "${POD_IP}:8080",
     "\"[::]:8080\""): (dict "bind" $bind "key" "frontends.http.bind") */}}
{{- define "haptic.bindPort" -}}
{{- $bind := trimAll "\" " (toString .bind) }}
{{- $port := regexFind "[0-9]+$" (regexReplaceAll "\\s.*$" $bind "") }}
{{- if not $port }}
{{- fail (printf "controller.templateLibraries.base.%s is %q: the chart needs it to end in :<port> to open that container port" .key (toString .bind)) }}
{{- end }}
{{- $port }}
{{- end }}

{{- define "haptic.httpsPort" -}}
{{- include "haptic.bindPort" (dict "bind" .Values.controller.templateLibraries.ingress.tls.bind "key" "ingress.tls.bind") }}
{{- end }}

{{/* "true" when the HTTPS port also serves HTTP/3 (UDP). */}}
{{- define "haptic.http3Enabled" -}}
{{- $http3 := (.Values.controller.templateLibraries.base | default dict).http3 | default dict -}}
{{- if and (eq (include "haptic.tlsEnabled" .) "true") (ne (toString $http3.enabled) "false") -}}true{{- end -}}
{{- end }}

{{- define "haptic.httpPort" -}}
{{- include "haptic.bindPort" (dict "bind" .Values.controller.templateLibraries.base.frontends.http.bind "key" "frontends.http.bind") }}
{{- end }}

{{/* Checks that hold across values the schema cannot relate. */}}
{{- define "haptic.validate" -}}
{{- $gate := eq (include "haptic.gateEnabled" .) "true" }}
{{- if $gate }}
{{- if ne (include "haptic.libEnabled" (dict "root" . "name" "kubernetesBackends")) "true" }}
{{- fail "controller.templateLibraries.kubernetesBackends.podReadinessGate.enabled=true needs controller.templateLibraries.kubernetesBackends.enabled=true: the gate's condition says HAProxy routes to the pod, and kubernetes-backends renders those servers" }}
{{- end }}
{{- if ne (include "haptic.libEnabled" (dict "root" . "name" "statusPatches150PodReadinessGate")) "true" }}
{{- fail "controller.templateLibraries.kubernetesBackends.podReadinessGate.enabled=true needs controller.templateLibraries.statusPatches150PodReadinessGate.enabled=true: that library sets the condition; without it gated pods never become Ready" }}
{{- end }}
{{- end }}
{{- if ne (include "haptic.libEnabled" (dict "root" . "name" "base")) "true" }}
{{- fail "controller.templateLibraries.base.enabled=false: base writes the global, defaults and http sections every configuration needs; the chart cannot run HAProxy without it" }}
{{- end }}
{{- if and (not .Values.agent.token.enabled) (not .Values.agent.tls.enabled) }}
{{- fail "agent.token.enabled=false and agent.tls.enabled=false: the agents need credentials; keep the token or enable mutual TLS" }}
{{- end }}
{{- if and .Values.agent.tls.enabled (not .Values.agent.tls.secretName) }}
{{- fail "agent.tls.enabled=true needs agent.tls.secretName: a Secret with ca.crt, tls.crt and tls.key" }}
{{- end }}
{{- $names := dict }}
{{- $known := dict "base" true "ingress" true "kubernetesBackends" true "statusPatches150PodReadinessGate" true }}
{{- $_ := set $known "ingressNginx" true }}
{{- $_ := set $known "gatewayApi" true }}
{{- $bundled := deepCopy $known }}
{{- range .Values.controller.customLibraries }}
{{- if hasKey $bundled (include "haptic.camelCase" .name) }}
{{- fail (printf "controller.customLibraries: %q is the name of a bundled library; a custom library needs a name of its own" .name) }}
{{- end }}
{{- if hasKey $names .name }}
{{- fail (printf "controller.customLibraries: %q is listed twice" .name) }}
{{- end }}
{{- $_ := set $names .name true }}
{{- $_ := set $known (include "haptic.camelCase" .name) true }}
{{- end }}
{{- range $key, $_ := .Values.controller.templateLibraries }}
{{- if not (hasKey $known $key) }}
{{- fail (printf "controller.templateLibraries.%s: no such library. Bundled: %s; a custom library's values need its entry in controller.customLibraries (key: the camelCase of its name)" $key (keys $bundled | sortAlpha | join ", ")) }}
{{- end }}
{{- end }}
{{- end }}

{{/* kebab-case to camelCase: status-patches-150-pod-readiness-gate -> statusPatches150PodReadinessGate */}}
{{- define "haptic.camelCase" -}}
{{- $parts := splitList "-" . }}
{{- first $parts }}
{{- range rest $parts }}{{ title . }}{{ end }}
{{- end }}

{{/* RBAC ----------------------------------------------------------------- */}}

{{/* The cluster-wide rules the enabled libraries need: what they watch, and
     the status they patch. Keep this in step with the libraries' plans. */}}
{{- define "haptic.clusterRules" -}}
{{- $ingress := eq (include "haptic.libEnabled" (dict "root" . "name" "ingress")) "true" }}
{{- $backends := eq (include "haptic.libEnabled" (dict "root" . "name" "kubernetesBackends")) "true" }}
{{- $statusGate := eq (include "haptic.libEnabled" (dict "root" . "name" "statusPatches150PodReadinessGate")) "true" }}
{{- $gate := eq (include "haptic.gateEnabled" .) "true" }}
{{- $nginx := eq (include "haptic.libEnabled" (dict "root" . "name" "ingressNginx")) "true" }}
{{- $rules := list }}
{{- /* Events go on the object a library blamed, in that object's namespace */}}
{{- $rules = append $rules (dict "apiGroups" (list "events.k8s.io" "") "resources" (list "events") "verbs" (list "create" "patch")) }}
{{- if or $ingress $backends $nginx }}
{{- /* ingress and ingress-nginx resolve named Service ports; kubernetes-backends renders Services */}}
{{- $rules = append $rules (dict "apiGroups" (list "") "resources" (list "services") "verbs" (list "get" "list" "watch")) }}
{{- end }}
{{- if $backends }}
{{- $rules = append $rules (dict "apiGroups" (list "discovery.k8s.io") "resources" (list "endpointslices") "verbs" (list "get" "list" "watch")) }}
{{- end }}
{{- if $ingress }}
{{- $rules = append $rules (dict "apiGroups" (list "networking.k8s.io") "resources" (list "ingresses" "ingressclasses") "verbs" (list "get" "list" "watch")) }}
{{- $rules = append $rules (dict "apiGroups" (list "networking.k8s.io") "resources" (list "ingresses/status") "verbs" (list "patch")) }}
{{- end }}
{{- if and $nginx (not $ingress) }}
{{- /* ingress-nginx reads Ingresses and IngressClasses; it writes no Ingress status */}}
{{- $rules = append $rules (dict "apiGroups" (list "networking.k8s.io") "resources" (list "ingresses" "ingressclasses") "verbs" (list "get" "list" "watch")) }}
{{- end }}
{{- if or $nginx (eq (include "haptic.tlsEnabled" .) "true") }}
{{- /* TLS Secrets (ingress) and Opaque ones (ingress-nginx auth-secret users): read only; the watches ask for type kubernetes.io/tls and Opaque only */}}
{{- $rules = append $rules (dict "apiGroups" (list "") "resources" (list "secrets") "verbs" (list "get" "list" "watch")) }}
{{- end }}
{{- if $nginx }}
{{- /* ingress-nginx's custom-headers: the ConfigMap an Ingress names, read only */}}
{{- $rules = append $rules (dict "apiGroups" (list "") "resources" (list "configmaps") "verbs" (list "get" "list" "watch")) }}
{{- end }}
{{- if and $gate (or $backends $statusGate) }}
{{- $rules = append $rules (dict "apiGroups" (list "") "resources" (list "pods") "verbs" (list "get" "list" "watch")) }}
{{- end }}
{{- if and $gate $statusGate }}
{{- $rules = append $rules (dict "apiGroups" (list "") "resources" (list "pods/status") "verbs" (list "patch")) }}
{{- end }}
{{- if eq (include "haptic.libEnabled" (dict "root" . "name" "gatewayApi")) "true" }}
{{- /* gateway-api: its kinds, their status, Namespaces (allowedRoutes
     selectors), TLS Secrets (certificateRefs), ConfigMaps (GatewayClass
     parametersRef, read only) and a Service per Gateway */}}
{{- $rules = append $rules (dict "apiGroups" (list "gateway.networking.k8s.io") "resources" (list "gatewayclasses" "gateways" "httproutes" "grpcroutes" "referencegrants") "verbs" (list "get" "list" "watch")) }}
{{- $rules = append $rules (dict "apiGroups" (list "gateway.networking.k8s.io") "resources" (list "gatewayclasses/status" "gateways/status" "httproutes/status" "grpcroutes/status") "verbs" (list "patch")) }}
{{- $rules = append $rules (dict "apiGroups" (list "") "resources" (list "namespaces" "secrets" "configmaps") "verbs" (list "get" "list" "watch")) }}
{{- $rules = append $rules (dict "apiGroups" (list "") "resources" (list "services") "verbs" (list "get" "list" "watch" "create" "patch" "delete")) }}
{{- $rules = append $rules (dict "apiGroups" (list "discovery.k8s.io") "resources" (list "endpointslices") "verbs" (list "get" "list" "watch" "create" "patch" "delete")) }}
{{- end }}
{{- range .Values.controller.customLibraries }}
{{- range .rbac }}
{{- $rules = append $rules . }}
{{- end }}
{{- end }}
{{- toYaml $rules }}
{{- end }}

{{/* The rules in the release namespace: the HAProxy pods, the Lease. */}}
{{- define "haptic.namespaceRules" -}}
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch]
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [create]
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  resourceNames: [{{ include "haptic.leaseName" . | quote }}]
  verbs: [get, update, patch]
{{- end }}

{{/* Pod affinity: the user's, else a preference to spread the component's
     replicas across nodes: (dict "root" $ "component" "haproxy" "affinity" ...) */}}
{{- define "haptic.affinity" -}}
{{- if .affinity }}
{{- toYaml .affinity }}
{{- else -}}
podAntiAffinity:
  preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- include "haptic.selectorLabels" . | nindent 12 }}
{{- end }}
{{- end }}

{{/* The custom components as the cluster holds them now (empty under
     `helm template`): a changed component restarts the controller on upgrade. */}}
{{- define "haptic.customLibrariesDigest" -}}
{{- range .Values.controller.customLibraries }}
{{- $cm := lookup "v1" "ConfigMap" $.Release.Namespace .configMap.name }}
{{- $key := .configMap.key | default (printf "%s.wasm" .name) }}
{{- $data := "" }}
{{- if $cm }}
{{- $data = index ($cm.binaryData | default dict) $key | default (index ($cm.data | default dict) $key) | default "" }}
{{- end }}
{{ .name }}={{ .configMap.name }}/{{ $key }}:{{ $data | sha256sum }}
{{- end }}
{{- end }}
