"""An example custom template library, in Python: while an Ingress carries
the annotation ``maintenance.haproxy-haptic.org/enabled: "true"``, every host
of its rules answers ``503`` with a ``Retry-After`` header instead of
reaching its backends.

It writes the hosts into pattern files next to haproxy.cfg and adds one rule
to the ``http`` frontend that the bundled ``base`` library defines, so a
change touches one file and the rule never grows with the cluster. A
wildcard host (``*.example.com``) matches by suffix, so unlike an Ingress
rule it also covers deeper subdomains.

The same library as ``examples/maintenance-mode`` (Rust); both render the
same configuration.
"""

import haptic_sdk as haptic
from haptic_sdk.names import quote

EXACT_HOSTS_FILE = "maps/maintenance-hosts.lst"
WILDCARD_HOSTS_FILE = "maps/maintenance-domains.lst"


class MaintenanceMode(haptic.Library):
    name = "maintenance-mode"
    version = "0.1.0"
    # After the bundled libraries, so `frontend http` exists.
    order = 500
    # `templateLibraries.maintenanceMode` values.
    defaults = {
        # The annotation that puts an Ingress into maintenance.
        "annotation": "maintenance.haproxy-haptic.org/enabled",
        # The frontend the rule goes into.
        "frontend": "http",
        # Body of the 503 answer.
        "message": "This service is down for maintenance. Please try again later.",
        # Seconds clients are told to wait (`Retry-After`).
        "retryAfterSeconds": 300,
    }

    def plan(self, values):
        unknown = sorted(set(values) - set(self.defaults))
        if unknown:
            raise haptic.RenderError(
                f"unknown values {', '.join(unknown)} under templateLibraries.maintenanceMode; "
                f"known: {', '.join(sorted(self.defaults))}"
            )
        # Only metadata and rules matter here; dropping the rest keeps the
        # host from sending it.
        ingresses = haptic.Watch(
            "ingresses", "networking.k8s.io/v1", "Ingress", ignore_fields=["status"]
        )
        return haptic.Plan([ingresses])

    def render(self, ctx, out):
        values = ctx.values
        hosts = set()
        for ingress in ctx.objects("ingresses"):
            annotations = ingress["metadata"].get("annotations") or {}
            if annotations.get(values["annotation"]) != "true":
                continue
            rules = (ingress.get("spec") or {}).get("rules") or []
            hosts.update(rule["host"] for rule in rules if rule.get("host"))

        # Patterns are matched against the lowercased Host header without its
        # port: exact hosts as strings, wildcard hosts (`*.example.com`) by
        # their `.example.com` suffix.
        wildcards = sorted(h for h in hosts if h.startswith("*."))
        exact = sorted(h for h in hosts if not h.startswith("*."))
        conditions = []
        for file, matcher, group in [
            (EXACT_HOSTS_FILE, "str", exact),
            (WILDCARD_HOSTS_FILE, "end", wildcards),
        ]:
            if not group:
                continue
            out.file(file, "".join(f"{host.lstrip('*').lower()}\n" for host in group))
            conditions.append(f"{{ req.hdr(host),field(1,:),lower -m {matcher} -f {file} }}")
        if not conditions:
            return
        out.snippet(
            haptic.SectionKind.FRONTEND,
            values["frontend"],
            haptic.Slot.REQUEST_RULES,
            "http-request return status 503 content-type text/plain"
            f" hdr Retry-After {int(values['retryAfterSeconds'])}"
            f" string {quote(values['message'])} if {' || '.join(conditions)}",
            priority=-100,
        )


# componentize-py calls the class named `Library` in this module.
Library = haptic.export(MaintenanceMode)
