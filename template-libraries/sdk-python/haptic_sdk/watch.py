"""What a library plans to watch: below the library class and the store,
which both read it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

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
