"""Drives a library natively, without a host: for unit tests of libraries
(``python -m unittest``, pytest, anything)."""

from __future__ import annotations

import json
from typing import Any, Optional

from .library import Library, Plan
from .objects import Applied, Deleted, IncomingChange, ObjectKey
from .output import (
    Delta,
    File,
    Item,
    Section,
    SectionKind,
    StatusPatch,
    file_key,
    section_key,
)
from .runtime import Runtime
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
        #: The library's whole output as the host would hold it, by key.
        self.output: dict[str, Item] = {}
        self._next_version = 1

    def configure(self, values: dict[str, Any]) -> Plan:
        """Configures again with new values."""
        info = self.runtime.info
        self.plan = self.runtime.configure(as_the_host_sends(values, info.name, info.defaults))
        return self.plan

    def apply(self, watch: str, obj: dict[str, Any]) -> None:
        """Queues an object for the next render. Namespace and name come from
        its metadata, the resourceVersion from ``metadata.resourceVersion`` or
        a fresh one per call."""
        metadata = obj.get("metadata", {})
        version = metadata.get("resourceVersion")
        if version is None:
            self._next_version += 1
            version = f"h{self._next_version}"
        key = ObjectKey(watch, metadata.get("namespace", ""), metadata.get("name", ""))
        self._pending.append(Applied(key, version, json.dumps(obj)))

    def delete(self, watch: str, namespace: str, name: str) -> None:
        """Queues a deletion for the next render."""
        self._pending.append(Deleted(ObjectKey(watch, namespace, name)))

    def render(self) -> Delta:
        """Renders the queued changes and folds the delta into :attr:`output`."""
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

    def status_patches(self) -> dict[str, Any]:
        """Every status patch of the output, ``namespace/name`` -> status."""
        return {
            f"{item.namespace}/{item.name}": json.loads(item.status)
            for item in self.output.values()
            if isinstance(item, StatusPatch)
        }
