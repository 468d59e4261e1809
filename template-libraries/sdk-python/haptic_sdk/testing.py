"""Drives a library natively, without a host: for unit tests of libraries
(``python -m unittest``, pytest, anything)."""

from __future__ import annotations

import json
from typing import Any, Optional

from .errors import RenderError
from .library import Library, Plan, Watch
from .objects import Applied, Deleted, IncomingChange, ObjectKey
from .output import (
    Delta,
    File,
    Item,
    OwnedObject,
    Section,
    SectionKind,
    StatusPatch,
    Warning,
    file_key,
    section_key,
)
from .runtime import Runtime
from .selectors import SelectorError, Selection, apply_defaults
from .values import as_the_host_sends


class Harness:
    """A library instance fed by hand, the way the host feeds it::

        harness = Harness(MaintenanceMode)
        harness.apply("ingresses", {"metadata": {...}, "spec": {...}})
        harness.render()
        assert harness.file("maps/maintenance-hosts.lst") == "shop.example.com\\n"
    """

    def __init__(self, library_class: type[Library], values: Optional[dict[str, Any]] = None) -> None:
        """A fresh instance configured with a ``templateLibraries`` tree; the
        library's own settings are merged over its defaults as the host does."""
        self.runtime = Runtime(library_class)
        self.plan: Plan = self.configure(values or {})
        self._pending: list[IncomingChange] = []
        # Objects the library holds (applied and selected), so an update its
        # watch no longer selects becomes a deletion, as the host sends it.
        self._delivered: set[ObjectKey] = set()
        # A watch whose selector does not parse: the next render fails with
        # it, as the host's render would.
        self._bad_watch: Optional[str] = None
        #: The library's whole output as the host would hold it, by key.
        self.output: dict[str, Item] = {}
        self._next_version = 1

    def configure(self, values: dict[str, Any]) -> Plan:
        """Configures again with new values."""
        info = self.runtime.info
        self.plan = self.runtime.configure(as_the_host_sends(values, info.name, info.defaults))
        return self.plan

    def apply(self, watch: str, obj: dict[str, Any]) -> None:
        """Queues an object for the next render, as the host would send it
        for ``watch``: with the API server's defaults filled in (a Secret
        without ``type`` is ``Opaque``), and only when the watch's
        namespace, label selector and field selector select it, by the
        host's own rules (:mod:`haptic_sdk.selectors`); an object it no
        longer selects is deleted. Namespace and name come from its
        metadata, the resourceVersion from ``metadata.resourceVersion`` or a
        fresh one per call."""
        obj = json.loads(json.dumps(obj))
        planned = self._planned(watch)
        if planned is not None and isinstance(obj, dict):
            apply_defaults(planned.api_version, planned.kind, obj)
        metadata = obj.get("metadata") or {}
        key = ObjectKey(watch, metadata.get("namespace") or "", metadata.get("name") or "")
        if planned is not None:
            try:
                selection = Selection(
                    planned.api_version,
                    planned.kind,
                    planned.namespace,
                    planned.label_selector,
                    planned.field_selector,
                )
            except SelectorError as error:
                self._bad_watch = f"watch `{watch}` has an {error}"
            else:
                if not selection.matches(obj):
                    if key in self._delivered:
                        self._delivered.discard(key)
                        self._pending.append(Deleted(key))
                    return
        version = metadata.get("resourceVersion")
        if version is None:
            self._next_version += 1
            version = f"h{self._next_version}"
        self._delivered.add(key)
        self._pending.append(Applied(key, version, json.dumps(obj)))

    def _planned(self, watch: str) -> Optional[Watch]:
        return next((w for w in self.plan.watches if w.name == watch), None)

    def delete(self, watch: str, namespace: str, name: str) -> None:
        """Queues a deletion for the next render."""
        key = ObjectKey(watch, namespace, name)
        self._delivered.discard(key)
        self._pending.append(Deleted(key))

    def render(self) -> Delta:
        """Renders the queued changes and folds the delta into :attr:`output`."""
        if self._bad_watch is not None:
            problem, self._bad_watch = self._bad_watch, None
            raise RenderError(f"{problem}; fix the selector in the library's plan")
        changes, self._pending = self._pending, []
        delta = self.runtime.render(changes)
        if delta.complete:
            self.output.clear()
        for key in delta.removals:
            self.output.pop(key, None)
        for key, item in delta.upserts:
            self.output[key] = item
        return delta

    def section(self, kind: SectionKind | str, name: str) -> Optional[str]:
        """The body of one section of the output."""
        item = self.output.get(section_key(kind, name))
        return item.body if isinstance(item, Section) else None

    def file(self, path: str) -> Optional[str]:
        """The content of one file of the output."""
        item = self.output.get(file_key(path))
        return item.content if isinstance(item, File) else None

    def warnings(self) -> list[tuple[str, str]]:
        """Every warning of the output as ``(reason, message)``, in key order."""
        return [
            (item.reason, item.message)
            for _, item in sorted(self.output.items())
            if isinstance(item, Warning)
        ]

    def owned_objects(self) -> dict[str, dict[str, Any]]:
        """Every owned object of the output, ``apiVersion/kind/name`` -> manifest."""
        return {
            f"{item.api_version}/{item.kind}/{item.name}": json.loads(item.manifest)
            for item in self.output.values()
            if isinstance(item, OwnedObject)
        }

    def status_patches(self) -> dict[str, Any]:
        """Every status patch of the output, ``namespace/name`` -> status."""
        return {
            f"{item.namespace}/{item.name}": json.loads(item.status)
            for item in self.output.values()
            if isinstance(item, StatusPatch)
        }
