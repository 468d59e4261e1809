"""Ingresses: which ones haptic serves (the bundled ``ingress`` library's
class rules, as the Rust SDK's ``haptic_sdk::ingress`` has them) and which
one a request matched (:func:`matched_ingress_acl`).

An Ingress is served when

1. ``spec.ingressClassName`` names an IngressClass whose ``spec.controller``
   is ours (``templateLibraries.ingress.controller``, default
   ``haproxy-haptic.org/controller``); a class name without such an
   IngressClass object is not served;
2. or it has no ``spec.ingressClassName`` but the deprecated annotation
   ``kubernetes.io/ingress.class`` equals our class name
   (``templateLibraries.ingress.className``, default ``haptic``);
3. or it has neither, and one of our IngressClasses is marked default
   (``ingressclass.kubernetes.io/is-default-class: "true"``).

Watch IngressClasses (``networking.k8s.io/v1`` ``IngressClass``) beside the
Ingresses to decide it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Optional

from .values import Values

#: The class name the ``ingress`` library serves by default.
DEFAULT_CLASS_NAME = "haptic"
#: The ``spec.controller`` of haptic's IngressClasses by default.
DEFAULT_CONTROLLER = "haproxy-haptic.org/controller"
#: The deprecated class annotation.
LEGACY_ANNOTATION = "kubernetes.io/ingress.class"
#: Marks an IngressClass as the cluster's default.
DEFAULT_CLASS_ANNOTATION = "ingressclass.kubernetes.io/is-default-class"
#: The variable naming the matched Ingress, ``namespace/name``.
MATCHED_INGRESS_VARIABLE = "txn.haptic_ingress"


def _get(obj: Any, *path: str) -> Any:
    for key in path:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj


@dataclass
class Classes:
    """Our IngressClasses, as far as the served-or-not decision needs them."""

    ours: set[str] = field(default_factory=set)
    default_is_ours: bool = False

    def serves(self, ingress: dict[str, Any], class_name: str) -> bool:
        """Whether ``ingress`` is ours (see the module docs)."""
        named = _get(ingress, "spec", "ingressClassName")
        if named is not None:
            return named in self.ours
        legacy = _get(ingress, "metadata", "annotations", LEGACY_ANNOTATION)
        if legacy is not None:
            return legacy == class_name
        return self.default_is_ours


@dataclass
class ClassRules:
    """The class settings of the ``ingress`` library's values."""

    class_name: str = DEFAULT_CLASS_NAME
    controller: str = DEFAULT_CONTROLLER

    @classmethod
    def from_values(cls, values: Values) -> "ClassRules":
        """The ``ingress`` library's class settings from the whole values
        tree the host hands every library; the defaults when absent."""
        tree = values.of("ingress") or {}
        class_name = tree.get("className") if isinstance(tree, dict) else None
        controller = tree.get("controller") if isinstance(tree, dict) else None
        return cls(
            class_name if isinstance(class_name, str) else DEFAULT_CLASS_NAME,
            controller if isinstance(controller, str) else DEFAULT_CONTROLLER,
        )

    def classes(self, ingress_classes: Iterable[dict[str, Any]]) -> Classes:
        """Indexes the cluster's IngressClasses by these rules."""
        index = Classes()
        for ingress_class in ingress_classes:
            if _get(ingress_class, "spec", "controller") != self.controller:
                continue
            name: Optional[str] = _get(ingress_class, "metadata", "name")
            if name:
                index.ours.add(name)
            if _get(ingress_class, "metadata", "annotations", DEFAULT_CLASS_ANNOTATION) == "true":
                index.default_is_ours = True
        return index

    def is_served(self, ingress: dict[str, Any], classes: Classes) -> bool:
        """Whether haptic serves ``ingress``, by the bundled library's rules."""
        return classes.serves(ingress, self.class_name)


def matched_ingress_acl(namespace: str, name: str) -> str:
    """An anonymous ACL true for requests routed by Ingress
    ``namespace/name``: ``{ var(txn.haptic_ingress) -m str shop/admin }``.
    Use it in a request-rules snippet at a priority above ``0`` (after
    ``ingress`` sets the variable) or in any response-rules snippet."""
    return f"{{ var({MATCHED_INGRESS_VARIABLE}) -m str {namespace}/{name} }}"
