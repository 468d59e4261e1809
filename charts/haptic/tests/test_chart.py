#!/usr/bin/env python3
"""Template tests of the haptic chart (run through run.sh).

Each case renders the chart with `helm template` (or expects it to fail) and
asserts on the rendered objects. Every failed assertion is printed with its
case; the exit status is 1 when any failed.
"""

import argparse
import base64
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import traceback

import yaml

GATE = "haproxy-haptic.org/load-balancer-ready"
GATE_SET = "controller.templateLibraries.kubernetesBackends.podReadinessGate.enabled=true"
# The user guide's commands, verbatim but for the chart reference.
GUIDE_PATCH = (
    "kubectl patch deployment my-app --type=json \\\n"
    "       -p '[{\"op\":\"add\",\"path\":\"/spec/template/spec/readinessGates\","
    "\"value\":[{\"conditionType\":\"haproxy-haptic.org/load-balancer-ready\"}]}]'"
)
GUIDE_CHECK = (
    "kubectl get pods -l app=my-app \\\n"
    "       -o custom-columns='NAME:.metadata.name,GATE:.status.conditions"
    "[?(@.type==\"haproxy-haptic.org/load-balancer-ready\")].status'"
)


class Failed(Exception):
    pass


class Case:
    def __init__(self, name):
        self.name = name
        self.failures = []

    def check(self, ok, message):
        if not ok:
            self.failures.append(message)
        return ok

    def equal(self, got, want, what):
        return self.check(got == want, f"{what}: got {got!r}, want {want!r}")


class Chart:
    def __init__(self, helm, chart):
        self.helm = helm
        self.chart = chart
        self.tmp = tempfile.mkdtemp(prefix="haptic-chart-test-")

    def run(self, *args):
        return subprocess.run(
            [self.helm, *args], capture_output=True, text=True, env=dict(os.environ, HELM_NAMESPACE="")
        )

    def write(self, name, text):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def template_args(self, values_files=(), sets=(), release="haptic", namespace="haptic", chart=None):
        args = ["template", release, chart or self.chart, "--namespace", namespace]
        for f in values_files:
            args += ["-f", f]
        for s in sets:
            args += ["--set", s]
        return args

    def render(self, **kw):
        proc = self.run(*self.template_args(**kw))
        if proc.returncode != 0:
            raise Failed(f"helm template failed ({proc.returncode}):\n{proc.stderr.strip()}")
        return Objects(proc.stdout)

    def render_error(self, **kw):
        proc = self.run(*self.template_args(**kw))
        if proc.returncode == 0:
            raise Failed(f"helm template succeeded, expected it to fail (args {kw})")
        return proc.stderr

    def notes(self, **kw):
        """NOTES.txt as `helm install` would print it: helm template skips
        NOTES, so a copy of the chart renders it into a ConfigMap."""
        copy = os.path.join(self.tmp, "notes-chart")
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(self.chart, copy, ignore=shutil.ignore_patterns("tests"))
        notes = os.path.join(copy, "templates", "NOTES.txt")
        with open(notes) as f:
            text = f.read()
        os.remove(notes)
        with open(os.path.join(copy, "templates", "_test_notes.tpl"), "w") as f:
            f.write('{{- define "haptic.test.notes" -}}\n' + text + "{{- end }}\n")
        with open(os.path.join(copy, "templates", "zz-test-notes.yaml"), "w") as f:
            f.write(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: test-notes\n"
                'data:\n  notes: {{ include "haptic.test.notes" . | quote }}\n'
            )
        objs = self.render(chart=copy, **kw)
        return objs.one("ConfigMap", "test-notes")["data"]["notes"]


class Objects:
    def __init__(self, text):
        self.docs = [d for d in yaml.safe_load_all(text) if d]

    def all(self, kind):
        return [d for d in self.docs if d.get("kind") == kind]

    def find(self, kind, name):
        found = [d for d in self.all(kind) if d["metadata"]["name"] == name]
        return found[0] if found else None

    def one(self, kind, name):
        obj = self.find(kind, name)
        if obj is None:
            have = sorted(f"{d['kind']}/{d['metadata']['name']}" for d in self.docs)
            raise Failed(f"no {kind}/{name} rendered; have {have}")
        return obj


# ---------------------------------------------------------------- helpers


def container(deploy, name):
    for c in deploy["spec"]["template"]["spec"]["containers"]:
        if c["name"] == name:
            return c
    raise Failed(f"Deployment {deploy['metadata']['name']} has no container {name}")


def flags(c):
    """--flag=value (or --flag value) arguments as a dict of lists; the first
    argument (the subcommand) under ''."""
    args = list(c.get("args", []))
    out = {"": [args[0]] if args else []}
    i = 1
    while i < len(args):
        a = args[i]
        if a.startswith("--") and "=" in a:
            k, v = a.split("=", 1)
            out.setdefault(k, []).append(v)
        elif a.startswith("--") and i + 1 < len(args) and not args[i + 1].startswith("--"):
            out.setdefault(a, []).append(args[i + 1])
            i += 1
        else:
            out.setdefault(a, []).append(None)
        i += 1
    return out


def mounts(c):
    return {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}


def volumes(deploy):
    return {v["name"]: v for v in deploy["spec"]["template"]["spec"].get("volumes", [])}


def grants(rules, group, resource, verb):
    """Whether any rule grants verb on group/resource (names unrestricted)."""
    for r in rules:
        if (
            (group in r.get("apiGroups", []) or "*" in r.get("apiGroups", []))
            and (resource in r.get("resources", []) or "*" in r.get("resources", []))
            and (verb in r.get("verbs", []) or "*" in r.get("verbs", []))
            and not r.get("resourceNames")
        ):
            return True
    return False


def mentions(rules, group, resource):
    return any(group in r.get("apiGroups", []) and resource in r.get("resources", []) for r in rules)


def selector_matches(selector, labels):
    for term in selector.split(","):
        k, v = term.split("=", 1)
        if labels.get(k) != v:
            return False
    return True


def port_number(c, name):
    for p in c.get("ports", []):
        if p["name"] == name:
            return p["containerPort"]
    return None


def cluster_rules(objs, release="haptic"):
    name = "haptic-controller" if release == "haptic" else f"{release}-haptic-controller"
    return objs.one("ClusterRole", name).get("rules") or []


def values_file(objs, name="haptic-controller-values"):
    return yaml.safe_load(objs.one("ConfigMap", name)["data"]["values.yaml"])


# ---------------------------------------------------------------- cases

CASES = []


def case(fn):
    CASES.append(fn)
    return fn


@case
def lint(t, chart):
    for extra in ([], ["--strict"], ["--strict", "--set", GATE_SET]):
        proc = chart.run("lint", chart.chart, "--namespace", "haptic", *extra)
        t.check(proc.returncode == 0, f"helm lint {' '.join(extra)} failed:\n{proc.stdout}{proc.stderr}")
    # The chart's own values.yaml, given back whole (as `helm get values --all`
    # exports it), passes the schema.
    chart.render(values_files=[os.path.join(chart.chart, "values.yaml")])


@case
def defaults(t, chart):
    objs = chart.render()
    ctl = objs.one("Deployment", "haptic-controller")
    hap = objs.one("Deployment", "haptic-haproxy")

    # The controller: 2 replicas, leader-elected, every flag.
    t.equal(ctl["spec"]["replicas"], 2, "controller replicas")
    c = container(ctl, "controller")
    f = flags(c)
    t.equal(c["command"], ["/usr/local/bin/haptic"], "controller command")
    t.equal(f[""], ["controller"], "controller subcommand")
    t.equal(f.get("--namespace"), ["$(POD_NAMESPACE)"], "--namespace")
    t.equal(f.get("--identity"), ["$(POD_NAME)"], "--identity")
    selector = "app.kubernetes.io/name=haptic,app.kubernetes.io/instance=haptic,app.kubernetes.io/component=haproxy"
    t.equal(f.get("--proxy-selector"), [selector], "--proxy-selector")
    t.equal(f.get("--agent-port"), ["8450"], "--agent-port")
    t.equal(f.get("--agent-token-file"), ["/etc/haptic/agent-token/token"], "--agent-token-file")
    t.equal(f.get("--values"), ["/etc/haptic/values/values.yaml"], "--values")
    t.equal(f.get("--lease-name"), ["haptic-controller"], "--lease-name")
    t.equal(f.get("--lease-duration"), ["15"], "--lease-duration")
    t.equal(f.get("--listen"), ["0.0.0.0:8451"], "--listen")
    for absent in ("--agent-ca", "--agent-client-cert", "--agent-client-key", "--library-dir", "--library"):
        t.check(absent not in f, f"controller has {absent} by default")
    env = {e["name"]: e for e in c["env"]}
    t.equal(env.get("POD_NAMESPACE", {}).get("valueFrom"), {"fieldRef": {"fieldPath": "metadata.namespace"}}, "POD_NAMESPACE")
    t.equal(env.get("POD_NAME", {}).get("valueFrom"), {"fieldRef": {"fieldPath": "metadata.name"}}, "POD_NAME")
    t.equal(env.get("MALLOC_ARENA_MAX", {}).get("value"), "1", "MALLOC_ARENA_MAX (as the memory guard and bench-scale measure)")
    t.equal(port_number(c, "metrics"), 8451, "controller metrics port")
    t.equal(c["readinessProbe"]["httpGet"]["path"], "/readyz", "controller readiness path")
    t.equal(c["livenessProbe"]["httpGet"]["path"], "/healthz", "controller liveness path")
    m = mounts(c)
    vols = volumes(ctl)
    t.equal(m.get("/etc/haptic/values"), "values", "values mount")
    t.equal(vols.get("values", {}).get("configMap", {}).get("name"), "haptic-controller-values", "values volume")
    t.equal(m.get("/etc/haptic/agent-token"), "agent-token", "controller token mount")
    t.equal(vols.get("agent-token", {}).get("secret", {}).get("secretName"), "haptic-agent-token", "controller token volume")
    t.equal(ctl["spec"]["template"]["spec"]["serviceAccountName"], "haptic-controller", "controller ServiceAccount")

    # The values file: templateLibraries + the whole tree; the checksum on
    # the pod template is the ConfigMap's content.
    cm = objs.one("ConfigMap", "haptic-controller-values")["data"]["values.yaml"]
    vf = yaml.safe_load(cm)
    t.equal(sorted(vf), ["templateLibraries"], "values file top-level keys")
    libs = vf["templateLibraries"]
    for lib in ("base", "ingress", "kubernetesBackends", "statusPatches150PodReadinessGate"):
        t.equal(libs.get(lib, {}).get("enabled"), True, f"templateLibraries.{lib}.enabled")
    t.equal(libs["kubernetesBackends"]["podReadinessGate"], {"enabled": False}, "gate default")
    t.equal(libs["base"]["frontends"]["http"]["bind"], ":8080", "base http bind")
    annotation = ctl["spec"]["template"]["metadata"]["annotations"].get("checksum/values")
    t.equal(annotation, hashlib.sha256(cm.rstrip("\n").encode()).hexdigest(), "checksum/values is the values file's sha256")

    # Cluster-wide RBAC: what the default libraries watch and patch, no pods.
    rules = cluster_rules(objs)
    t.check(not mentions(rules, "", "pods"), f"ClusterRole has pods rules with the gate off: {rules}")
    t.check(not mentions(rules, "", "pods/status"), f"ClusterRole has pods/status with the gate off: {rules}")
    for res in ("ingresses", "ingressclasses"):
        for verb in ("get", "list", "watch"):
            t.check(grants(rules, "networking.k8s.io", res, verb), f"ClusterRole lacks {verb} {res}")
    t.check(grants(rules, "networking.k8s.io", "ingresses/status", "patch"), "ClusterRole lacks patch ingresses/status")
    for group, res in (("", "services"), ("discovery.k8s.io", "endpointslices")):
        for verb in ("get", "list", "watch"):
            t.check(grants(rules, group, res, verb), f"ClusterRole lacks {verb} {res}")
    binding = objs.one("ClusterRoleBinding", "haptic-controller")
    t.equal(binding["roleRef"]["name"], "haptic-controller", "ClusterRoleBinding roleRef")
    t.equal(binding["subjects"], [{"kind": "ServiceAccount", "name": "haptic-controller", "namespace": "haptic"}], "ClusterRoleBinding subjects")

    # Namespaced RBAC: the HAProxy pods, the Lease, Events.
    role = objs.one("Role", "haptic-controller")
    t.equal(role["metadata"]["namespace"], "haptic", "Role namespace")
    rr = role["rules"]
    for verb in ("get", "list", "watch"):
        t.check(grants(rr, "", "pods", verb), f"Role lacks {verb} pods")
    t.check(grants(rr, "coordination.k8s.io", "leases", "create"), "Role lacks create leases")
    lease_rules = [r for r in rr if "leases" in r["resources"] and r.get("resourceNames")]
    t.check(
        any(r["resourceNames"] == ["haptic-controller"] and {"get", "update", "patch"} <= set(r["verbs"]) for r in lease_rules),
        f"Role lacks get/update/patch on the Lease haptic-controller: {rr}",
    )
    # Events go on the object a library blamed (an Ingress in its own
    # namespace), so they are granted cluster-wide.
    for group in ("events.k8s.io", ""):
        for verb in ("create", "patch"):
            t.check(grants(rules, group, "events", verb), f"ClusterRole lacks {verb} events in group {group!r}")
    rb = objs.one("RoleBinding", "haptic-controller")
    t.equal(rb["subjects"][0]["name"], "haptic-controller", "RoleBinding subject")

    # The agent token: generated, and both sides mount it.
    secret = objs.one("Secret", "haptic-agent-token")
    token = base64.b64decode(secret["data"]["token"]).decode()
    t.check(len(token) >= 32, f"agent token too short: {len(token)} characters")
    t.check(token != chart.render().one("Secret", "haptic-agent-token")["data"]["token"], "two renders without a cluster produced the same token")

    # HAProxy: 2 replicas, haproxy + agent sharing the config directory.
    t.equal(hap["spec"]["replicas"], 2, "HAProxy replicas")
    pod_labels = hap["spec"]["template"]["metadata"]["labels"]
    t.check(selector_matches(selector, pod_labels), f"--proxy-selector does not select the HAProxy pods: {pod_labels}")
    t.check(
        not selector_matches(selector, ctl["spec"]["template"]["metadata"]["labels"]),
        "--proxy-selector also selects the controller pods",
    )
    hc, ac = container(hap, "haproxy"), container(hap, "agent")
    t.equal(hc["args"], ["haproxy", "--config-dir=/var/lib/haptic/haproxy"], "haproxy args")
    af = flags(ac)
    t.equal(af[""], ["agent"], "agent subcommand")
    t.equal(af.get("--config-dir"), ["/var/lib/haptic/haproxy"], "agent --config-dir")
    t.equal(af.get("--listen"), ["0.0.0.0:8450"], "agent --listen")
    t.equal(af.get("--token-file"), ["/etc/haptic/agent-token/token"], "agent --token-file")
    hv = volumes(hap)
    shared = mounts(hc).get("/var/lib/haptic/haproxy")
    t.check(shared is not None and shared == mounts(ac).get("/var/lib/haptic/haproxy"), "haproxy and agent do not share /var/lib/haptic/haproxy")
    t.check("emptyDir" in hv.get(shared or "", {}), "the shared config directory is not an emptyDir")
    t.equal(hv.get("agent-token", {}).get("secret", {}).get("secretName"), "haptic-agent-token", "agent token volume")
    t.equal(port_number(hc, "http"), 8080, "haproxy http port")
    t.equal(port_number(hc, "healthz"), 8081, "haproxy healthz port")
    t.equal(port_number(hc, "stats"), None, "stats port with stats off")
    t.equal(hc["readinessProbe"].get("httpGet"), {"path": "/healthz", "port": "healthz"}, "haproxy readiness probe")
    t.equal(ac["livenessProbe"]["httpGet"]["path"], "/healthz", "agent liveness path")
    t.equal(ac["readinessProbe"]["httpGet"]["path"], "/readyz", "agent readiness path")
    t.equal(port_number(ac, "agent"), 8450, "agent port")
    agent_env = {e["name"]: e for e in ac["env"]}
    t.equal(agent_env.get("MALLOC_ARENA_MAX", {}).get("value"), "1", "agent MALLOC_ARENA_MAX (as bench-scale measures)")
    t.equal(hap["spec"]["template"]["spec"].get("automountServiceAccountToken"), False, "HAProxy pods mount an API token")

    svc = objs.one("Service", "haptic-haproxy")
    t.equal(svc["spec"]["type"], "ClusterIP", "HAProxy Service type")
    t.equal(svc["spec"]["ports"], [{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}, {"name": "https", "port": 443, "targetPort": "https", "protocol": "TCP"}, {"name": "https-quic", "port": 443, "targetPort": "https-quic", "protocol": "UDP"}], "HAProxy Service ports")
    t.check(selector_matches(",".join(f"{k}={v}" for k, v in svc["spec"]["selector"].items()), pod_labels), "HAProxy Service does not select the HAProxy pods")

    ic = objs.one("IngressClass", "haptic")
    t.equal(ic["spec"]["controller"], "haproxy-haptic.org/controller", "IngressClass controller")
    t.check("ingressclass.kubernetes.io/is-default-class" not in (ic["metadata"].get("annotations") or {}), "IngressClass is the default class by default")

    # PDBs select their pods; security contexts are locked down.
    for name, deploy in (("haptic-controller", ctl), ("haptic-haproxy", hap)):
        pdb = objs.one("PodDisruptionBudget", name)
        t.equal(pdb["spec"].get("maxUnavailable"), 1, f"PDB {name} maxUnavailable")
        t.equal(pdb["spec"]["selector"]["matchLabels"], deploy["spec"]["selector"]["matchLabels"], f"PDB {name} selector")
        spec = deploy["spec"]["template"]["spec"]
        t.equal(spec["securityContext"].get("runAsNonRoot"), True, f"{name} runAsNonRoot")
        t.equal(spec["securityContext"].get("seccompProfile"), {"type": "RuntimeDefault"}, f"{name} seccomp")
        for c in spec["containers"]:
            sc = c.get("securityContext", {})
            t.equal(sc.get("readOnlyRootFilesystem"), True, f"{name}/{c['name']} readOnlyRootFilesystem")
            t.equal(sc.get("allowPrivilegeEscalation"), False, f"{name}/{c['name']} allowPrivilegeEscalation")
            t.equal(sc.get("capabilities"), {"drop": ["ALL"]}, f"{name}/{c['name']} capabilities")
            t.check(c.get("resources", {}).get("requests"), f"{name}/{c['name']} has no resource requests")

    for kind in ("ServiceMonitor", "PodMonitor"):
        t.equal(objs.all(kind), [], f"{kind} rendered by default")


@case
def gate_on_as_the_guide_upgrades(t, chart):
    # `helm get values` of an installed release, then the guide's upgrade.
    exported = chart.write("haptic-values.yaml", "haproxy:\n  service:\n    type: LoadBalancer\n")
    off = chart.render(values_files=[exported])
    on = chart.render(values_files=[exported], sets=[GATE_SET])
    rules = cluster_rules(on)
    for verb in ("get", "list", "watch"):
        t.check(grants(rules, "", "pods", verb), f"gate on: ClusterRole lacks {verb} pods")
    t.check(grants(rules, "", "pods/status", "patch"), "gate on: ClusterRole lacks patch pods/status")
    t.check(not any("pods/status" in r["resources"] and set(r["verbs"]) - {"patch"} for r in rules), "gate on: pods/status has verbs besides patch")
    t.check(not any("pods" in r["resources"] and set(r["verbs"]) - {"get", "list", "watch"} for r in rules), "gate on: pods has verbs besides get/list/watch")
    t.check(not mentions(cluster_rules(off), "", "pods"), "gate off: ClusterRole has pods")
    t.equal(values_file(on)["templateLibraries"]["kubernetesBackends"]["podReadinessGate"]["enabled"], True, "gate in the values file")
    t.equal(on.one("Service", "haptic-haproxy")["spec"]["type"], "LoadBalancer", "exported values kept")
    ann = lambda o: o.one("Deployment", "haptic-controller")["spec"]["template"]["metadata"]["annotations"]["checksum/values"]
    t.check(ann(on) != ann(off), "enabling the gate does not change checksum/values (the controller would not restart)")


@case
def tls_secrets_only_when_tls_is_on(t, chart):
    on = chart.render()
    rules = cluster_rules(on)
    for verb in ("get", "list", "watch"):
        t.check(grants(rules, "", "secrets", verb), f"TLS on: ClusterRole lacks {verb} secrets")
    t.check(not any("secrets" in r["resources"] and set(r["verbs"]) - {"get", "list", "watch"} for r in rules), "TLS on: secrets has verbs besides get/list/watch")
    t.check(not any("secrets" in r["resources"] for r in on.one("Role", "haptic-controller")["rules"]), "the Role grants secrets")
    # The chart's default certificate, named in the values file.
    secret = on.one("Secret", "haptic-default-certificate")
    t.equal(secret["type"], "kubernetes.io/tls", "default certificate Secret type")
    t.check(set(secret["data"]) == {"tls.crt", "tls.key"}, f"default certificate data keys: {sorted(secret['data'])}")
    tls = values_file(on)["templateLibraries"]["ingress"]["tls"]
    t.equal(tls["defaultCertificate"], {"secret": "haptic/haptic-default-certificate"}, "default certificate in the values file")
    ports = {p["name"]: p for p in container(on.one("Deployment", "haptic-haproxy"), "haproxy")["ports"]}
    t.equal(ports.get("https", {}).get("containerPort"), 8443, "HAProxy https container port")
    svc_ports = {p["name"]: p for p in on.one("Service", "haptic-haproxy")["spec"]["ports"]}
    t.equal((svc_ports.get("https", {}).get("port"), svc_ports.get("https", {}).get("targetPort")), (443, "https"), "Service https port")

    # A Secret of the user's: no chart certificate, the user's name passed on.
    own = chart.render(sets=["controller.templateLibraries.ingress.tls.defaultCertificate.secret=certs/wildcard"])
    t.equal(own.find("Secret", "haptic-default-certificate"), None, "chart certificate rendered although values name one")
    t.equal(values_file(own)["templateLibraries"]["ingress"]["tls"]["defaultCertificate"], {"secret": "certs/wildcard"}, "the user's default certificate")
    err = chart.render_error(sets=["controller.templateLibraries.ingress.tls.defaultCertificate.secret=wildcard"])
    t.check("defaultCertificate" in err, f"a Secret reference without namespace is not refused clearly:\n{err}")

    off = chart.render(sets=["controller.templateLibraries.ingress.tls.enabled=false"])
    t.check(not mentions(cluster_rules(off), "", "secrets"), "TLS off: ClusterRole grants secrets")
    t.equal(off.find("Secret", "haptic-default-certificate"), None, "TLS off: default certificate rendered")
    t.check("https" not in {p["name"] for p in off.one("Service", "haptic-haproxy")["spec"]["ports"]}, "TLS off: Service has https")
    no_ingress = chart.render(sets=["controller.templateLibraries.ingress.enabled=false"])
    t.check(not mentions(cluster_rules(no_ingress), "", "secrets"), "ingress off: ClusterRole grants secrets")


@case
def validator_runs_haproxy_c_without_the_token(t, chart):
    ctl = chart.render().one("Deployment", "haptic-controller")
    spec = ctl["spec"]["template"]["spec"]
    t.equal(spec.get("automountServiceAccountToken"), False, "pod-level token automount")
    token_path = "/var/run/secrets/kubernetes.io/serviceaccount"
    controller, validator = container(ctl, "controller"), container(ctl, "validator")
    t.equal(mounts(controller).get(token_path), "kube-api-access", "the controller's token mount")
    t.check(token_path not in mounts(validator), "the validator container mounts the token")
    sources = volumes(ctl)["kube-api-access"]["projected"]["sources"]
    t.check(any("serviceAccountToken" in s for s in sources), "kube-api-access has no token source")
    t.check(not any(m.startswith("/var/run/secrets") or m.startswith("/etc/haptic") for m in mounts(validator)), f"the validator mounts credentials: {mounts(validator)}")
    t.equal(validator["args"], ["validator", "--socket=/run/haptic-validator/validate.sock"], "validator args")
    t.equal(flags(controller).get("--validator-socket"), ["/run/haptic-validator/validate.sock"], "controller --validator-socket")
    t.equal(mounts(validator).get("/run/haptic-validator"), "validator-socket", "the validator's socket mount")
    t.equal(mounts(controller).get("/run/haptic-validator"), "validator-socket", "the controller's socket mount")
    sc = validator.get("securityContext", {})
    t.check(sc.get("readOnlyRootFilesystem") is True and sc.get("capabilities", {}).get("drop") == ["ALL"], f"validator securityContext: {sc}")
    t.check(not validator.get("ports"), "the validator exposes a port")

    off = chart.render(sets=["controller.validator.enabled=false"]).one("Deployment", "haptic-controller")
    t.check("validator" not in [c["name"] for c in off["spec"]["template"]["spec"]["containers"]], "validator off: container rendered")
    t.equal(flags(container(off, "controller")).get("--validator-socket"), None, "validator off: --validator-socket")
    t.equal(mounts(container(off, "controller")).get(token_path), "kube-api-access", "validator off: the controller keeps its token")


@case
def gateway_api_only_when_enabled(t, chart):
    off = chart.render()
    t.check(not mentions(cluster_rules(off), "gateway.networking.k8s.io", "gateways"), "gateway-api off: ClusterRole grants gateways")
    t.equal(values_file(off)["templateLibraries"]["gatewayApi"]["enabled"], False, "gateway-api is off by default")
    t.equal(off.all("CustomResourceDefinition"), [], "CRDs installed without gatewayAPI.installCRDs")

    on = chart.render(sets=["controller.templateLibraries.gatewayApi.enabled=true"])
    rules = cluster_rules(on)
    for resource in ("gatewayclasses", "gateways", "httproutes", "grpcroutes", "referencegrants"):
        t.check(grants(rules, "gateway.networking.k8s.io", resource, "watch"), f"gateway-api on: no watch on {resource}")
    for resource in ("gatewayclasses/status", "gateways/status", "httproutes/status", "grpcroutes/status"):
        t.check(grants(rules, "gateway.networking.k8s.io", resource, "patch"), f"gateway-api on: no patch on {resource}")
    for verb in ("create", "patch", "delete", "list"):
        t.check(grants(rules, "", "services", verb), f"gateway-api on: no {verb} on services (a Service per Gateway)")
    t.check(grants(rules, "", "namespaces", "watch"), "gateway-api on: no watch on namespaces (allowedRoutes selectors)")
    for verb in ("get", "list", "watch"):
        t.check(grants(rules, "", "configmaps", verb), f"gateway-api on: no {verb} on configmaps (GatewayClass parametersRef)")
    t.check(not any("" in r.get("apiGroups", []) and "configmaps" in r.get("resources", []) and set(r.get("verbs", [])) - {"get", "list", "watch"} for r in rules), "gateway-api on: configmaps granted beyond read")
    t.check(not mentions(cluster_rules(off), "", "configmaps"), "gateway-api off: configmaps granted")
    selector = values_file(on)["templateLibraries"]["gatewayApi"]["service"]["selector"]
    haproxy = on.one("Deployment", "haptic-haproxy")["spec"]["template"]["metadata"]["labels"]
    t.check(selector and all(haproxy.get(k) == v for k, v in selector.items()), f"Gateway Services select {selector}, not the HAProxy pods {haproxy}")
    t.equal(values_file(on)["templateLibraries"]["gatewayApi"]["service"]["podNamespace"], "haptic", "Gateway Services' EndpointSlices list the release's HAProxy pods")
    for verb in ("create", "patch", "delete", "list"):
        t.check(grants(rules, "discovery.k8s.io", "endpointslices", verb), f"gateway-api on: no {verb} on endpointslices (one per Gateway Service)")
    own = chart.render(sets=["controller.templateLibraries.gatewayApi.enabled=true", "controller.templateLibraries.gatewayApi.service.selector.app=edge"])
    t.equal(values_file(own)["templateLibraries"]["gatewayApi"]["service"]["selector"], {"app": "edge"}, "the user's Service selector")

    crds = chart.render(sets=["gatewayAPI.installCRDs=true"]).all("CustomResourceDefinition")
    names = sorted(c["metadata"]["name"] for c in crds)
    for kind in ("gatewayclasses", "gateways", "httproutes", "grpcroutes", "referencegrants"):
        t.check(f"{kind}.gateway.networking.k8s.io" in names, f"installCRDs: no {kind} CRD in {names}")
    for crd in crds:
        annotations = crd["metadata"].get("annotations", {})
        t.equal(annotations.get("gateway.networking.k8s.io/bundle-version"), "v1.6.3", f"{crd['metadata']['name']} version")
        t.equal(annotations.get("helm.sh/resource-policy"), "keep", f"{crd['metadata']['name']} would be deleted on uninstall")
    expect_error(t, chart, ["controller.templateLibraries.gatewayApi.service.type=Headless"], "gatewayApi")


@case
def directive_policy_allow_list_reaches_the_controller(t, chart):
    t.equal(sorted(values_file(chart.render())), ["templateLibraries"], "an empty allow-list is left out")
    allowing = chart.write("allow.yaml", "controller:\n  directivePolicy:\n    allow:\n      - {library: my-lua, directives: [lua-load]}\n")
    policy = values_file(chart.render(values_files=[allowing])).get("directivePolicy")
    t.equal(policy, {"allow": [{"library": "my-lua", "directives": ["lua-load"]}]}, "the allow-list in the values file")
    err = chart.render_error(sets=["controller.directivePolicy.allow[0].library=x", "controller.directivePolicy.allow[0].files[0]=relative.pem"])
    t.check("files" in err, f"a relative allowed file is not refused by the schema:\n{err}")


@case
def gate_needs_its_libraries(t, chart):
    err = chart.render_error(sets=[GATE_SET, "controller.templateLibraries.statusPatches150PodReadinessGate.enabled=false"])
    t.check("statusPatches150PodReadinessGate.enabled=true" in err, f"unclear error for gate without its status library:\n{err}")
    err = chart.render_error(sets=[GATE_SET, "controller.templateLibraries.kubernetesBackends.enabled=false"])
    t.check("kubernetesBackends.enabled=true" in err, f"unclear error for gate without kubernetes-backends:\n{err}")


@case
def ingresses_publish_the_haproxy_service_address(t, chart):
    objs = chart.render()
    ingress = values_file(objs)["templateLibraries"]["ingress"]
    service = next(o for o in objs.all("Service") if o["metadata"]["labels"].get("app.kubernetes.io/component") == "haproxy")
    t.equal(ingress["publishedService"], "haptic/" + service["metadata"]["name"], "the chart's HAProxy Service is published by default")
    other = values_file(chart.render(sets=["controller.templateLibraries.ingress.publishedService=edge/lb"]))
    t.equal(other["templateLibraries"]["ingress"]["publishedService"], "edge/lb", "a Service the values name")
    none = values_file(chart.render(sets=["controller.templateLibraries.ingress.publishedService=none"]))
    t.equal(none["templateLibraries"]["ingress"]["publishedService"], "", "none publishes nothing")
    chart.render_error(sets=["controller.templateLibraries.ingress.publishedService=no-slash"])


@case
def ingress_disabled(t, chart):
    objs = chart.render(sets=["controller.templateLibraries.ingress.enabled=false"])
    rules = cluster_rules(objs)
    for res in ("ingresses", "ingressclasses", "ingresses/status"):
        t.check(not mentions(rules, "networking.k8s.io", res), f"ingress off: ClusterRole still has {res}")
    t.check(grants(rules, "", "services", "watch"), "ingress off: kubernetes-backends lost services")
    t.equal(objs.all("IngressClass"), [], "ingress off: IngressClass rendered")
    t.equal(values_file(objs)["templateLibraries"]["ingress"]["enabled"], False, "ingress off in the values file")

    objs = chart.render(sets=["controller.templateLibraries.ingress.enabled=false", "controller.templateLibraries.kubernetesBackends.enabled=false"])
    t.equal(
        [r for r in cluster_rules(objs) if r["resources"] != ["events"]], [], "ingress and kubernetes-backends off: ClusterRole rules besides events"
    )


@case
def ingress_nginx(t, chart):
    off = chart.render(sets=["controller.templateLibraries.ingress.enabled=false"])
    t.check(not mentions(cluster_rules(off), "networking.k8s.io", "ingresses"), "ingress-nginx off by default: ClusterRole has ingresses")
    t.equal(values_file(off)["templateLibraries"]["ingressNginx"]["enabled"], False, "ingress-nginx off in the values file")
    sets = [
        "controller.templateLibraries.ingress.enabled=false",
        "controller.templateLibraries.ingressNginx.enabled=true",
        "controller.templateLibraries.ingressNginx.classNames={haptic-nginx}",
        "controller.templateLibraries.ingressNginx.controller=haproxy-haptic.org/ingress-nginx",
        "ingressClass.ingressNginx.create=true",
    ]
    # Turned on with its defaults it takes over ingress-nginx's own class
    # (the fixtures show the library serving class nginx from these values).
    defaults = values_file(chart.render(sets=sets[:2]))["templateLibraries"]["ingressNginx"]
    t.equal((defaults["classNames"], defaults["controller"]), (["nginx"], "k8s.io/ingress-nginx"),
            "ingress-nginx on with defaults: serves class nginx of controller k8s.io/ingress-nginx")
    on = chart.render(sets=sets)
    rules = cluster_rules(on)
    for res in ("ingresses", "ingressclasses"):
        t.check(grants(rules, "networking.k8s.io", res, "watch"), f"ingress-nginx on: ClusterRole lacks {res}")
    t.check(not mentions(rules, "networking.k8s.io", "ingresses/status"), "ingress-nginx writes no Ingress status")
    t.check(grants(rules, "", "services", "watch"), "ingress-nginx on: ClusterRole lacks services")
    t.check(grants(rules, "", "secrets", "watch"), "ingress-nginx on: ClusterRole lacks secrets (auth-secret)")
    t.check(grants(rules, "", "configmaps", "watch"), "ingress-nginx on: ClusterRole lacks configmaps (custom-headers)")
    ic = on.one("IngressClass", "haptic-nginx")
    t.equal(ic["spec"]["controller"], "haproxy-haptic.org/ingress-nginx", "ingress-nginx IngressClass controller")
    t.equal(values_file(on)["templateLibraries"]["ingressNginx"]["classNames"], ["haptic-nginx"], "classNames reach the values file")
    err = chart.render_error(sets=sets[:2] + ["ingressClass.ingressNginx.create=true"])
    t.check("must be one of" in err, f"an IngressClass the library would not serve is not refused:\n{err}")
    err = chart.render_error(sets=["controller.templateLibraries.ingressNginx.unsupportedAnnotations=ignore"])
    t.check("unsupportedAnnotations" in err, f"a bad unsupportedAnnotations passes the schema:\n{err}")
    passthrough = chart.render(sets=sets[:2] + ["controller.templateLibraries.ingressNginx.sslPassthrough.enabled=true"])
    t.equal(values_file(passthrough)["templateLibraries"]["ingressNginx"]["sslPassthrough"],
            {"enabled": True, "internalBind": "127.0.0.1:10443"}, "sslPassthrough reaches the values file")
    err = chart.render_error(sets=["controller.templateLibraries.ingressNginx.sslPassthrough.internalBind=a b"])
    t.check("internalBind" in err, f"an internalBind with a space passes the schema:\n{err}")


@case
def ingress_class(t, chart):
    objs = chart.render(sets=["ingressClass.default=true", "controller.templateLibraries.ingress.className=edge"])
    ic = objs.one("IngressClass", "edge")
    t.equal(ic["metadata"].get("annotations", {}).get("ingressclass.kubernetes.io/is-default-class"), "true", "default-class annotation")
    t.equal(chart.render(sets=["ingressClass.create=false"]).all("IngressClass"), [], "ingressClass.create=false")


@case
def custom_library(t, chart):
    vals = chart.write(
        "custom.yaml",
        """
controller:
  customLibraries:
    - name: my-library
      configMap: {name: my-library-wasm, key: lib.wasm}
      rbac:
        - apiGroups: [""]
          resources: [configmaps]
          verbs: [get, list, watch]
    - name: other
      configMap: {name: other}
  templateLibraries:
    myLibrary: {enabled: true, greeting: hello}
""",
    )
    objs = chart.render(values_files=[vals])
    ctl = objs.one("Deployment", "haptic-controller")
    c = container(ctl, "controller")
    t.equal(flags(c).get("--library-dir"), ["/etc/haptic/libraries"], "--library-dir")
    t.equal(mounts(c).get("/etc/haptic/libraries"), "libraries", "libraries mount")
    sources = volumes(ctl).get("libraries", {}).get("projected", {}).get("sources", [])
    t.equal(
        [(s["configMap"]["name"], s["configMap"]["items"]) for s in sources],
        [("my-library-wasm", [{"key": "lib.wasm", "path": "my-library.wasm"}]), ("other", [{"key": "other.wasm", "path": "other.wasm"}])],
        "libraries projected volume",
    )
    t.check("checksum/libraries" in ctl["spec"]["template"]["metadata"]["annotations"], "no checksum/libraries annotation")
    t.equal(values_file(objs)["templateLibraries"].get("myLibrary"), {"enabled": True, "greeting": "hello"}, "custom library values")
    rules = cluster_rules(objs)
    t.check(grants(rules, "", "configmaps", "watch"), f"custom library rbac not in the ClusterRole: {rules}")
    t.check(not mentions(cluster_rules(chart.render()), "", "configmaps"), "configmaps granted without the custom library")

    err = chart.render_error(sets=["controller.templateLibraries.myLibrary.enabled=true"])
    t.check("controller.templateLibraries.myLibrary: no such library" in err, f"unclear error for values of an unlisted library:\n{err}")
    expect_error(t, chart, ["controller.customLibraries[0].name=My_Lib", "controller.customLibraries[0].configMap.name=x"], "/controller/customLibraries/0/name")
    expect_error(t, chart, ["controller.customLibraries[0].name=kubernetes-backends", "controller.customLibraries[0].configMap.name=x"], "name of a bundled library")
    expect_error(t, chart, ["controller.customLibraries[0].name=a", "controller.customLibraries[0].configMap.name=x", "controller.customLibraries[1].name=a", "controller.customLibraries[1].configMap.name=y"], "listed twice")


@case
def mtls(t, chart):
    objs = chart.render(sets=["agent.tls.enabled=true", "agent.tls.secretName=haptic-agent-tls"])
    ctl, hap = objs.one("Deployment", "haptic-controller"), objs.one("Deployment", "haptic-haproxy")
    f = flags(container(ctl, "controller"))
    t.equal(f.get("--agent-ca"), ["/etc/haptic/agent-tls/ca.crt"], "--agent-ca")
    t.equal(f.get("--agent-client-cert"), ["/etc/haptic/agent-tls/tls.crt"], "--agent-client-cert")
    t.equal(f.get("--agent-client-key"), ["/etc/haptic/agent-tls/tls.key"], "--agent-client-key")
    t.equal(f.get("--agent-token-file"), ["/etc/haptic/agent-token/token"], "token kept with mTLS")
    ac = container(hap, "agent")
    af = flags(ac)
    t.equal(af.get("--tls-cert"), ["/etc/haptic/agent-tls/tls.crt"], "agent --tls-cert")
    t.equal(af.get("--tls-key"), ["/etc/haptic/agent-tls/tls.key"], "agent --tls-key")
    t.equal(af.get("--tls-client-ca"), ["/etc/haptic/agent-tls/ca.crt"], "agent --tls-client-ca")
    t.equal(ac["readinessProbe"]["httpGet"].get("scheme"), "HTTPS", "agent probe scheme")
    for d, cname in ((ctl, "controller"), (hap, "agent")):
        t.equal(mounts(container(d, cname)).get("/etc/haptic/agent-tls"), "agent-tls", f"{cname} TLS mount")
        t.equal(volumes(d).get("agent-tls", {}).get("secret", {}).get("secretName"), "haptic-agent-tls", f"{cname} TLS Secret")

    objs = chart.render(sets=["agent.tls.enabled=true", "agent.tls.secretName=s", "agent.token.enabled=false"])
    t.equal([s for s in objs.all("Secret") if s["type"] != "kubernetes.io/tls"], [], "token disabled: token Secret rendered")
    t.check("--agent-token-file" not in flags(container(objs.one("Deployment", "haptic-controller"), "controller")), "token disabled: --agent-token-file passed")
    err = chart.render_error(sets=["agent.tls.enabled=true"])
    t.check("/agent/tls/secretName" in err, f"unclear error for TLS without a Secret:\n{err}")
    err = chart.render_error(sets=["agent.token.enabled=false"])
    t.check("the agents need credentials" in err, f"unclear error for an agent without credentials:\n{err}")


@case
def existing_token_secret(t, chart):
    objs = chart.render(sets=["agent.token.existingSecret=my-token"])
    t.equal([s for s in objs.all("Secret") if s["type"] != "kubernetes.io/tls"], [], "existingSecret: token Secret rendered")
    t.equal(volumes(objs.one("Deployment", "haptic-haproxy"))["agent-token"]["secret"]["secretName"], "my-token", "existingSecret mounted")


def expect_error(t, chart, sets, *needles):
    """helm template with sets must fail, its message naming every needle."""
    try:
        err = chart.render_error(sets=sets)
    except Failed as e:
        t.failures.append(str(e))
        return
    t.check(all(n in err for n in needles), f"unclear error for {' '.join(sets)} (want {needles}):\n{err}")


@case
def schema_typos(t, chart):
    expect_error(t, chart, ["controller.replicaz=3"], "/controller", "replicaz", "not allowed")
    expect_error(t, chart, ["controller.templateLibraries.base.enabled=yes"], "/controller/templateLibraries/base/enabled", "boolean")
    expect_error(t, chart, ["controller.templateLibraries.kubernetes-backends.enabled=false"], "kubernetes-backends", "not allowed")
    expect_error(t, chart, ["haproxy.service.type=Loadbalancer"], "/haproxy/service/type")
    expect_error(t, chart, [GATE_SET.replace("=true", "=1")], "podReadinessGate/enabled", "boolean")
    expect_error(t, chart, ["haproxy.replicas=two"], "/haproxy/replicas", "integer")
    expect_error(t, chart, ["agentt.port=1"], "agentt", "not allowed")


@case
def binds_and_ports(t, chart):
    objs = chart.render(sets=[
        'controller.templateLibraries.base.frontends.http.bind="${POD_IP}:9090"',
        "controller.templateLibraries.base.frontends.healthz.enabled=false",
        "controller.templateLibraries.base.frontends.stats.enabled=true",
    ])
    hc = container(objs.one("Deployment", "haptic-haproxy"), "haproxy")
    t.equal(port_number(hc, "http"), 9090, "http port from a ${POD_IP} bind")
    t.equal(port_number(hc, "healthz"), None, "healthz port with healthz off")
    t.equal(port_number(hc, "stats"), 8404, "stats port")
    t.equal(hc["readinessProbe"].get("tcpSocket"), {"port": "http"}, "readiness without healthz")
    err = chart.render_error(sets=["controller.templateLibraries.base.frontends.http.bind=unix@/x.sock"])
    t.check("frontends.http.bind" in err, f"unclear error for a bind without a port:\n{err}")


@case
def http3_over_udp_on_the_https_port(t, chart):
    """HTTP/3 listens on the HTTPS port over UDP: the HAProxy container and
    its Service carry both protocols, and the libraries advertise the port
    clients reach (the Service's), not the pod's."""
    objs = chart.render(sets=["haproxy.service.httpsPort=443"])
    hc = container(objs.one("Deployment", "haptic-haproxy"), "haproxy")
    quic = [p for p in hc["ports"] if p["name"] == "https-quic"]
    t.equal([(p["containerPort"], p["protocol"]) for p in quic], [(port_number(hc, "https"), "UDP")], "https-quic container port")
    svc = objs.one("Service", "haptic-haproxy")
    by_name = {p["name"]: p for p in svc["spec"]["ports"]}
    t.equal((by_name.get("https-quic") or {}).get("protocol"), "UDP", "Service https-quic protocol")
    t.equal((by_name.get("https-quic") or {}).get("port"), by_name["https"]["port"], "Service https-quic port")
    t.equal(values_file(objs)["templateLibraries"]["base"]["http3"]["advertisedPort"], 443, "alt-svc advertises the Service port")
    pinned = chart.render(sets=["controller.templateLibraries.base.http3.advertisedPort=8443"])
    t.equal(values_file(pinned)["templateLibraries"]["base"]["http3"]["advertisedPort"], 8443, "an advertisedPort of the user's stays")
    off = chart.render(sets=["controller.templateLibraries.base.http3.enabled=false"])
    t.equal(port_number(container(off.one("Deployment", "haptic-haproxy"), "haproxy"), "https-quic"), None, "no UDP port with http3 off")
    t.check(all(p["name"] != "https-quic" for p in off.one("Service", "haptic-haproxy")["spec"]["ports"]), "no UDP Service port with http3 off")
    expect_error(t, chart, ["controller.templateLibraries.base.http3.advertisedPort=70000"], "advertisedPort")


@case
def listen_on_the_pod_ip(t, chart):
    """Pods sharing a network namespace (the test bed) bind their own address:
    every container that listens has POD_IP, and listenAddress may name it."""
    objs = chart.render(sets=["controller.listenAddress=$(POD_IP)", "agent.listenAddress=$(POD_IP)"])
    ctl = container(objs.one("Deployment", "haptic-controller"), "controller")
    hap = objs.one("Deployment", "haptic-haproxy")
    t.equal(flags(ctl).get("--listen"), ["$(POD_IP):8451"], "controller --listen on the pod IP")
    t.equal(flags(container(hap, "agent")).get("--listen"), ["$(POD_IP):8450"], "agent --listen on the pod IP")
    pod_ip = {"fieldRef": {"fieldPath": "status.podIP"}}
    for c in (ctl, container(hap, "agent"), container(hap, "haproxy")):
        env = {e["name"]: e for e in c["env"]}
        t.equal(env.get("POD_IP", {}).get("valueFrom"), pod_ip, f"{c['name']} POD_IP")
    v6 = chart.render(sets=["agent.listenAddress=[::]"])
    t.equal(flags(container(v6.one("Deployment", "haptic-haproxy"), "agent")).get("--listen"), ["[::]:8450"], "agent --listen on [::]")
    expect_error(t, chart, ["agent.listenAddress=0.0.0.0:8450"], "/agent/listenAddress")
    expect_error(t, chart, ["controller.listenAddress=::"], "/controller/listenAddress")


@case
def release_names(t, chart):
    objs = chart.render(release="prod", namespace="edge")
    ctl = objs.one("Deployment", "prod-haptic-controller")
    f = flags(container(ctl, "controller"))
    t.equal(f.get("--lease-name"), ["prod-haptic-controller"], "--lease-name follows the release")
    t.check("app.kubernetes.io/instance=prod" in f["--proxy-selector"][0], "--proxy-selector follows the release")
    role = objs.one("Role", "prod-haptic-controller")
    t.equal(role["metadata"]["namespace"], "edge", "Role in the release namespace")
    t.check(any(r.get("resourceNames") == ["prod-haptic-controller"] for r in role["rules"]), "Role names the release's Lease")
    objs.one("Secret", "prod-haptic-agent-token")


@case
def monitoring(t, chart):
    objs = chart.render(sets=["metrics.serviceMonitor.enabled=true", "metrics.podMonitor.enabled=true"])
    sm = objs.one("ServiceMonitor", "haptic-controller")
    t.equal(sm["spec"]["endpoints"][0]["port"], "metrics", "ServiceMonitor port")
    t.equal(sm["spec"]["selector"]["matchLabels"], objs.one("Service", "haptic-controller-metrics")["spec"]["selector"], "ServiceMonitor selects the metrics Service")
    pm = objs.one("PodMonitor", "haptic-haproxy")
    t.equal(pm["spec"]["podMetricsEndpoints"][0]["port"], "agent", "PodMonitor port")


@case
def notes(t, chart):
    text = chart.notes()
    t.check("kubectl -n haptic port-forward service/haptic-haproxy 8080:80" in text, f"NOTES: no port-forward for ClusterIP:\n{text}")
    t.check("kind load image-archive target/image/haptic-" in text, f"NOTES: the default image does not say how to load it:\n{text}")
    text = chart.notes(sets=["image.repository=registry.example.com/haptic"])
    t.check("registry.example.com/haptic:" in text and "kind load" not in text, f"NOTES: a registry image is told to be loaded:\n{text}")
    t.check(GATE_SET in text, f"NOTES: gate off does not say how to enable it:\n{text}")
    text = chart.notes(sets=[GATE_SET, "haproxy.service.type=LoadBalancer"])
    t.check("jsonpath='{.status.loadBalancer.ingress[0]}'" in text, f"NOTES: no LoadBalancer address command:\n{text}")
    t.check(GUIDE_PATCH in text, f"NOTES: gate on lacks the guide's kubectl patch:\n{text}")
    t.check(GUIDE_CHECK in text, f"NOTES: gate on lacks the guide's check command:\n{text}")


def built_image():
    """The image `make image` builds: IMAGE_NAME in the Makefile, tagged with
    the workspace's version (what `haptic --version` prints)."""
    repo = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
    name = version = None
    with open(os.path.join(repo, "Makefile")) as f:
        for line in f:
            if line.startswith("IMAGE_NAME :="):
                name = line.split(":=", 1)[1].strip()
    with open(os.path.join(repo, "Cargo.toml")) as f:
        for line in f:
            if line.startswith("version = "):
                version = line.split("=", 1)[1].strip().strip('"')
                break
    if not name or not version:
        raise Failed(f"cannot read IMAGE_NAME from the Makefile ({name}) or the version from Cargo.toml ({version})")
    return name, version


def images(objs):
    """Every image a rendered object would make a kubelet pull."""
    found = []
    for obj in objs.docs:
        spec = obj.get("spec", {}).get("template", {}).get("spec", {}) if obj.get("kind") != "Pod" else obj.get("spec", {})
        for key in ("initContainers", "containers", "ephemeralContainers"):
            for c in spec.get(key) or []:
                found.append((f"{obj['kind']}/{obj['metadata']['name']} {c['name']}", c.get("image")))
        for v in spec.get("volumes") or []:
            if "image" in v:
                found.append((f"{obj['kind']}/{obj['metadata']['name']} volume {v['name']}", v["image"].get("reference")))
    return found


@case
def image_is_the_one_make_image_builds(t, chart):
    name, version = built_image()
    with open(os.path.join(chart.chart, "Chart.yaml")) as f:
        app_version = yaml.safe_load(f)["appVersion"]
    t.equal(app_version, version, "Chart.yaml appVersion (the default tag) is the workspace version")
    want = f"{name}:{version}"
    for sets in ([], [GATE_SET, "agent.tls.enabled=true", "agent.tls.secretName=agent-tls"]):
        found = images(chart.render(sets=sets))
        t.check(len(found) >= 3, f"expected the controller, haproxy and agent containers, found {found}")
        for where, image in found:
            t.equal(image, want, f"{where} image (set {sets})")
    # A user's registry, tag and digest are taken as given.
    found = images(chart.render(sets=["image.repository=registry.example.com/haptic", "image.tag=9.9.9"]))
    for where, image in found:
        t.equal(image, "registry.example.com/haptic:9.9.9", f"{where} image with repository and tag set")
    # The preStop hook runs in the image, which has no shell: haptic itself.
    hap = container(chart.render().one("Deployment", "haptic-haproxy"), "haproxy")
    hook = hap["lifecycle"]["preStop"]["exec"]["command"]
    t.equal(hook, ["/usr/local/bin/haptic", "soft-stop", "--delay=5", "--pid=1"], "haproxy preStop")


@case
def alert_rules(t, chart):
    """The PrometheusRule the chart renders passes `promtool check rules` and
    the unit tests of every alert (alerts.test.yaml); off by default."""
    t.check(not chart.render().all("PrometheusRule"), "no PrometheusRule by default")
    objs = chart.render(sets=["metrics.prometheusRule.enabled=true", "metrics.prometheusRule.labels.release=kube-prometheus"])
    rule = objs.one("PrometheusRule", "haptic")
    t.equal(rule["metadata"]["labels"].get("release"), "kube-prometheus", "PrometheusRule labels from values")
    alerts = [r["alert"] for g in rule["spec"]["groups"] for r in g["rules"]]
    t.equal(
        sorted(alerts),
        sorted(["HapticGateWaiting", "HapticNoLeader", "HapticConfigRefused", "HapticAgentUnreachable",
                "HapticFleetNotConverged", "HapticCertificateExpiring"]),
        "alerts",
    )
    for g in rule["spec"]["groups"]:
        for r in g["rules"]:
            t.check('namespace="haptic"' in r["expr"], f"{r['alert']} reads the release's namespace only: {r['expr']}")
    promtool = os.environ.get("PROMTOOL")
    if not t.check(bool(promtool), "PROMTOOL is not set (run.sh builds it)"):
        return
    work = os.path.join(chart.tmp, "rules")
    os.makedirs(work, exist_ok=True)
    with open(os.path.join(work, "rules.yaml"), "w") as f:
        yaml.safe_dump({"groups": rule["spec"]["groups"]}, f, sort_keys=False)
    shutil.copy(os.path.join(chart.chart, "tests", "alerts.test.yaml"), work)
    for args in (["check", "rules", "rules.yaml"], ["test", "rules", "alerts.test.yaml"]):
        proc = subprocess.run([promtool, *args], cwd=work, capture_output=True, text=True)
        t.check(proc.returncode == 0, f"promtool {' '.join(args)} failed:\n{proc.stdout}{proc.stderr}")


@case
def grafana_dashboard(t, chart):
    t.check(not [c for c in chart.render().all("ConfigMap") if c["metadata"]["name"].endswith("-dashboard")],
            "no dashboard ConfigMap by default")
    objs = chart.render(sets=["metrics.grafanaDashboard.enabled=true", "metrics.grafanaDashboard.namespace=monitoring"])
    cm = objs.one("ConfigMap", "haptic-dashboard")
    t.equal(cm["metadata"]["namespace"], "monitoring", "dashboard namespace from values")
    t.equal(cm["metadata"]["labels"].get("grafana_dashboard"), "1", "the Grafana sidecar's label")
    import json
    with open(os.path.join(chart.chart, "files", "dashboard.json")) as f:
        want = json.load(f)
    t.equal(json.loads(cm["data"]["haptic.json"]), want, "the ConfigMap holds files/dashboard.json")
    exprs = [tg["expr"] for p in want["panels"] for tg in p.get("targets", [])]
    t.check(len(exprs) >= 20, f"dashboard queries: {len(exprs)}")
    for e in exprs:
        t.check('namespace="$namespace"' in e, f"query not scoped to the namespace variable: {e}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--helm", required=True)
    ap.add_argument("--chart", required=True)
    ap.add_argument("only", nargs="*", help="run the cases whose name contains one of these")
    args = ap.parse_args()
    chart = Chart(args.helm, os.path.abspath(args.chart))
    selected = [c for c in CASES if not args.only or any(w in c.__name__ for w in args.only)]
    if not selected:
        print(f"no case matches {args.only}; cases: {[c.__name__ for c in CASES]}", file=sys.stderr)
        return 2
    failed = 0
    try:
        for fn in selected:
            t = Case(fn.__name__)
            try:
                fn(t, chart)
            except Failed as e:
                t.failures.append(str(e))
            except Exception:
                t.failures.append(traceback.format_exc())
            if t.failures:
                failed += 1
                print(f"FAIL {t.name}")
                for f in t.failures:
                    print("  - " + f.replace("\n", "\n    "))
            else:
                print(f"ok   {t.name}")
    finally:
        shutil.rmtree(chart.tmp, ignore_errors=True)
    print(f"{len(selected) - failed}/{len(selected)} chart test cases passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
