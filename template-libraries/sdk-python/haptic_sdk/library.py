"""The class a template library subclasses, and what it plans to watch."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Optional

if TYPE_CHECKING:
    from .objects import Context
    from .output import Output
    from .values import Values

#: Dropped from every watch unless the library keeps it explicitly.
MANAGED_FIELDS = "metadata.managedFields"


@dataclass
class Watch:
    """A set of Kubernetes objects a library wants to see."""

    #: Unique within the library, e.g. ``ingresses``.
    name: str
    #: e.g. ``networking.k8s.io/v1``.
    api_version: str
    #: e.g. ``Ingress``.
    kind: str
    #: Only objects in this namespace; ``None`` for all.
    namespace: Optional[str] = None
    #: A label selector such as ``app=web,tier!=cache``; ``None`` for all.
    label_selector: Optional[str] = None
    #: Dotted paths the host removes before the object reaches the library
    #: (``status``, ``spec.containers``): less to send and to parse.
    #: ``metadata.managedFields`` is always among them.
    ignore_fields: list[str] = field(default_factory=list)
    #: A field selector such as ``type=kubernetes.io/tls``; ``None`` for all.
    #: The API server filters, so other objects never cost the host memory
    #: unless another library watches the kind with a different selector
    #: (see the README's "Which objects a watch gets"). Which fields a kind
    #: supports is the API server's (Secrets: ``type``, ``metadata.name``,
    #: ``metadata.namespace``); a field an object lacks reads as the API
    #: server's default for it (a Secret without ``type`` is ``Opaque``).
    field_selector: Optional[str] = None
    #: Fail every render while an object of this watch is not JSON, instead
    #: of leaving it out with an ``ObjectUnreadable`` warning naming it: for
    #: a watch where a missing object would make the configuration wrong
    #: rather than smaller. The last good configuration stays deployed.
    strict: bool = False

    def __post_init__(self) -> None:
        if MANAGED_FIELDS not in self.ignore_fields:
            self.ignore_fields = [MANAGED_FIELDS, *self.ignore_fields]


@dataclass
class Plan:
    """A library's answer to its values: what it watches."""

    watches: list[Watch] = field(default_factory=list)
    #: ``apiVersion/kind`` (``v1/Pod``) of objects whose status the library
    #: patches, so the host can check it holds the permission.
    patches_status_of: list[str] = field(default_factory=list)
    #: ``apiVersion/kind`` (``v1/Service``) of objects the library asks the
    #: host to apply (:meth:`haptic_sdk.Output.owned_object`): the host
    #: checks it may create, patch, list and delete them, and finds the ones
    #: it applied before a restart. Secrets may not be applied.
    applies: list[str] = field(default_factory=list)


class Library:
    """A template library. Subclass it, set the class attributes, override
    :meth:`plan` and :meth:`render`, and export it with
    :func:`haptic_sdk.export`.

    One instance lives as long as the WebAssembly instance: caches kept on
    ``self`` survive between renders. The host calls :meth:`plan` whenever
    the values change and :meth:`render` whenever watched objects changed.
    After ``plan``, or after a failed render, the next render is *complete*
    (``ctx.complete``): incremental caches must be rebuilt from ``ctx``'s
    objects.
    """

    #: Kebab-case name, e.g. ``maintenance-mode``; its camelCase form
    #: (``maintenanceMode``) is the library's key in the values tree.
    name: ClassVar[str]
    #: The library's own version.
    version: ClassVar[str] = "0.1.0"
    #: Libraries render and merge in ascending order; ties break by name.
    #: The bundled ones use 0-200, so custom ones go above.
    order: ClassVar[int] = 100
    #: Default values (a JSON object), merged under the user's values.
    defaults: ClassVar[dict[str, Any]] = {}

    def plan(self, values: Values) -> Plan:
        """What the library watches for these values. The default watches
        nothing, for libraries that render from values alone."""
        return Plan()

    def render(self, ctx: Context, out: Output) -> None:
        """Writes the library's output for the current objects and values.

        By default ``out`` expects the whole output every time and the SDK
        sends the host only what differs from the previous render. A library
        that tracks changes itself calls ``out.retain_previous()`` and emits
        only what changed.
        """
        raise NotImplementedError(f"{type(self).__name__} must define render(self, ctx, out)")
