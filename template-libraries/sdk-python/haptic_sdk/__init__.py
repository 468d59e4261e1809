"""The Python guest SDK for haptic template libraries.

A template library is a WebAssembly component that turns watched Kubernetes
objects and Helm-style values into HAProxy configuration, auxiliary files,
status patches, warnings and objects the host applies for it. This package
speaks the contract ``haptic:template@0.3.0`` (``wit/haptic-template@0.3.0``
in the haptic repository): it hides the WIT bindings behind a :class:`Library` class to subclass and
:func:`export`, keeps the library's view of its objects (plain dicts, parsed
once per resourceVersion), tells it what changed, and sends the host only
the output items that differ from the previous render.

A complete library that puts every Service's cluster IP into a map file::

    import haptic_sdk as haptic

    class ServiceMap(haptic.Library):
        name = "service-map"
        order = 500
        defaults = {"fileName": "services.map"}

        def plan(self, values):
            return haptic.Plan([haptic.Watch("services", "v1", "Service")])

        def render(self, ctx, out):
            lines = []
            for key, service in ctx.items("services"):
                ip = service.get("spec", {}).get("clusterIP")
                line = ip and haptic.names.map_line(f"{key.namespace}/{key.name}", ip)
                if line:
                    lines.append(line)
            out.file(f"maps/{ctx.values['fileName']}", "".join(lines))

    # componentize-py calls the class named `Library` in the app module.
    Library = haptic.export(ServiceMap)

Build it with ``componentize-py -d <haptic>/wit/haptic-template@0.3.0 -w
template-library componentize app -p . -p <haptic>/template-libraries/sdk-python
-o service-map.wasm``; :class:`haptic_sdk.testing.Harness` runs the same class
natively in unit tests.

Modules: ``library`` (the class and plan), ``values``, ``objects`` (the
object view and render context), ``output`` (the builder), ``names``
(HAProxy-safe names and escaping), ``tls`` (certificate checks and the
default certificate, by the host), ``crypt`` (password hash checks, by the
host), ``ingress`` (which Ingresses haptic serves, the matched-Ingress
ACL), ``selectors`` (which objects a watch gets), ``log``, ``testing``.
"""

from . import crypt, ingress, log, names, selectors, tls
from .errors import RenderError
from .library import Library, Plan, Watch
from .objects import Changed, Context, ObjectKey
from .output import Delta, Output, SectionKind, Slot, StatusVariant
from .values import Values

__all__ = [
    "Changed",
    "Context",
    "Delta",
    "Library",
    "ObjectKey",
    "Output",
    "Plan",
    "RenderError",
    "SectionKind",
    "Slot",
    "StatusVariant",
    "Values",
    "Watch",
    "crypt",
    "export",
    "ingress",
    "log",
    "names",
    "selectors",
    "tls",
]


def export(library_class: type[Library]) -> type:
    """Exports ``library_class`` as the component's
    ``haptic:template/library`` implementation. Assign the result to
    ``Library`` at the top of the app module (componentize-py looks for
    that name); outside a component it returns a class that does nothing
    but checks ``library_class``, so the module imports in unit tests."""
    from ._guest import adapter

    return adapter(library_class)
