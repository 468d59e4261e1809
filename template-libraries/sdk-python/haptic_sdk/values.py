"""The Helm-style ``templateLibraries`` values tree."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Iterator, Optional

from .errors import RenderError


class MissingValue(RenderError, KeyError):
    """A value the library reads is neither set nor defaulted. A ``KeyError``
    too, so ``values.get(name, default)`` and ``name in values`` work."""


class Values(Mapping[str, Any]):
    """A library's own values (``templateLibraries.<camelCaseName>``, its
    defaults merged), read like a dict: ``values["frontend"]``. The values of
    another library are at :meth:`of`.

    The host sends each enabled library's subtree complete: its defaults with
    the user's settings merged over them, where a user's ``null`` removed a
    default (Helm's rule). Only when the host sent no subtree (a bare unit
    test) are the defaults used.
    """

    def __init__(self, tree: Any, library: str, defaults: dict[str, Any]) -> None:
        if tree is None:
            tree = {}
        if not isinstance(tree, dict):
            raise RenderError(f"values are not a JSON object: {tree!r}")
        self.key = camel_case(library)
        own = tree.get(self.key)
        if own is None:
            own = copy.deepcopy(defaults)
        if not isinstance(own, dict):
            raise RenderError(
                f"values of `templateLibraries.{self.key}` are not an object but {own!r}; "
                "fix them in the Helm values"
            )
        self.tree: dict[str, Any] = tree
        self.own: dict[str, Any] = own

    def __getitem__(self, name: str) -> Any:
        try:
            return self.own[name]
        except KeyError:
            raise MissingValue(
                f"`templateLibraries.{self.key}.{name}` is not set and has no default; "
                "set it in the Helm values"
            ) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self.own)

    def __len__(self) -> int:
        return len(self.own)

    def of(self, camel_name: str) -> Optional[dict[str, Any]]:
        """Another library's values by camelCase name
        (``kubernetesBackends``); ``None`` when that library is disabled or
        absent."""
        return self.tree.get(camel_name)

    def __repr__(self) -> str:
        return f"Values({self.key}={self.own!r})"


def camel_case(kebab: str) -> str:
    """``status-patches-150-pod-readiness-gate`` -> ``statusPatches150PodReadinessGate``."""
    out: list[str] = []
    upper = False
    for c in kebab:
        if c in "-_":
            upper = bool(out)
        elif upper:
            out.append(c.upper())
            upper = False
        else:
            out.append(c)
    return "".join(out)


def merge(base: Any, over: Any) -> Any:
    """Deep-merges ``over`` into a copy of ``base`` as Helm and the host do:
    objects merge key by key, a ``None`` removes the key, anything else
    replaces (lists included)."""
    if not isinstance(over, dict):
        return copy.deepcopy(over)
    merged = copy.deepcopy(base) if isinstance(base, dict) else {}
    for key, value in over.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge(merged.get(key), value)
    return merged


def as_the_host_sends(tree: dict[str, Any], library: str, defaults: dict[str, Any]) -> dict[str, Any]:
    """The tree as the host sends it: ``library``'s subtree is its defaults
    with the user's settings in ``tree`` merged over them. For tests that
    give only the settings a case changes."""
    key = camel_case(library)
    tree = dict(tree)
    tree[key] = merge(defaults, tree.get(key) or {})
    return tree
