"""The library's view of its watched objects, kept between renders and
updated from the host's changes. Objects are plain data: each one's JSON is
parsed once per resourceVersion into dicts and lists."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterator, Optional, Union

from .errors import RenderError
from .keys import ObjectKey  # noqa: F401 - haptic_sdk.objects.ObjectKey stays importable
from .values import Values
from .watch import Plan, Watch

#: A Kubernetes object as parsed JSON.
Object = dict[str, Any]


@dataclass(frozen=True)
class Applied:
    """The host's change: an object was created or updated."""

    key: ObjectKey
    resource_version: str
    json: str


@dataclass(frozen=True)
class Deleted:
    """The host's change: an object is gone."""

    key: ObjectKey


IncomingChange = Union[Applied, Deleted]


@dataclass
class _Stored:
    resource_version: str
    value: Object


@dataclass
class Changed:
    """How one object changed during the batch of changes a render applied."""

    key: ObjectKey
    #: The object before this batch; ``None`` if it is new.
    previous: Optional[Object]
    #: The object now; ``None`` if it was deleted.
    current: Optional[Object]

    @property
    def watch(self) -> str:
        """The watch the object belongs to."""
        return self.key.watch

    @property
    def deleted(self) -> bool:
        """True when the object no longer exists."""
        return self.current is None


class _WatchStore:
    def __init__(self, watch: Watch) -> None:
        self.watch = watch
        # namespace -> name -> object, kept sorted so renders are
        # deterministic whatever order the host sent. An update keeps its
        # place; only a new object or namespace makes a re-sort due, done
        # once before the next read rather than on every read.
        self.objects: dict[str, dict[str, _Stored]] = {}
        self._unsorted = False

    def get(self, namespace: str, name: str) -> Optional[_Stored]:
        names = self.objects.get(namespace)
        return names.get(name) if names else None

    def put(self, key: ObjectKey, stored: Optional[_Stored]) -> Optional[_Stored]:
        names = self.objects.get(key.namespace)
        previous = names.get(key.name) if names else None
        if stored is None:
            if previous is not None:
                del names[key.name]  # type: ignore[union-attr]
                if not names:
                    del self.objects[key.namespace]
            return previous
        if names is None:
            names = self.objects[key.namespace] = {}
            self._unsorted = True
        elif previous is None:
            self._unsorted = True
        names[key.name] = stored
        return previous

    def sorted(self) -> dict[str, dict[str, _Stored]]:
        if self._unsorted:
            self.objects = {
                ns: dict(sorted(names.items())) for ns, names in sorted(self.objects.items())
            }
            self._unsorted = False
        return self.objects

    def __len__(self) -> int:
        return sum(len(names) for names in self.objects.values())


class Store:
    """All watched objects of one library instance."""

    def __init__(self) -> None:
        self.watches: dict[str, _WatchStore] = {}
        # Objects whose latest version is not JSON, with why: left out of
        # the view with an `ObjectUnreadable` warning (the runtime emits
        # it), or for a strict watch failing every render, until they are
        # fixed or deleted; never silently gone from the configuration.
        self.broken: dict[ObjectKey, str] = {}

    def set_plan(self, plan: Plan) -> None:
        """Adopts a new plan. Objects of a watch planned again with the same
        definition are kept; the host sends the objects of new or changed
        watches."""
        old, self.watches = self.watches, {}
        for watch in plan.watches:
            kept = old.get(watch.name)
            same = kept is not None and kept.watch == watch
            self.watches[watch.name] = kept if same and kept else _WatchStore(watch)
        self.broken = {k: v for k, v in self.broken.items() if k.watch in self.watches}

    def apply(self, changes: list[IncomingChange], track: bool) -> list[Changed]:
        """Applies the host's changes and returns them collapsed to one entry
        per object (before the batch vs after), sorted by key. Re-sending an
        object at the resourceVersion already held is no change."""
        collapsed: dict[ObjectKey, Changed] = {}

        def record(key: ObjectKey, previous: Optional[_Stored], current: Optional[_Stored]) -> None:
            if not track:
                return
            if key in collapsed:
                collapsed[key].current = current.value if current else None
            else:
                collapsed[key] = Changed(
                    key, previous.value if previous else None, current.value if current else None
                )

        for change in changes:
            key = change.key
            store = self.watches.get(key.watch)
            if store is None:
                raise RenderError(
                    f"received {key} for a watch the library did not plan; the host and "
                    "library disagree about the plan",
                    key,
                )
            if isinstance(change, Deleted):
                self.broken.pop(key, None)
                record(key, store.put(key, None), None)
                continue
            held = store.get(key.namespace, key.name)
            if held is not None and held.resource_version == change.resource_version:
                if key not in self.broken:
                    continue
            try:
                value = json.loads(change.json)
            except ValueError as error:
                self.broken[key] = (
                    f"cannot read {key} (resourceVersion {change.resource_version}) as JSON: "
                    f"{error}"
                )
                record(key, store.put(key, None), None)
                continue
            self.broken.pop(key, None)
            stored = _Stored(change.resource_version, value)
            record(key, store.put(key, stored), stored)
        for key, message in self.broken.items():
            if self.watches[key.watch].watch.strict:
                raise RenderError(message, key)
        return [collapsed[key] for key in sorted(collapsed)]

    def unreadable(self) -> dict[ObjectKey, str]:
        """Objects left out because they are not JSON (watches that are not
        strict), with why, sorted by key."""
        return {
            key: self.broken[key]
            for key in sorted(self.broken)
            if not self.watches[key.watch].watch.strict
        }

    def watch_store(self, watch: str) -> _WatchStore:
        store = self.watches.get(watch)
        if store is None:
            planned = ", ".join(f"`{name}`" for name in self.watches) or "none"
            raise RenderError(
                f"watch `{watch}` is not part of the current plan (planned: {planned}); "
                "a bug in the library"
            )
        return store


class Context:
    """What a render sees: the objects, what changed since the previous
    render, and the values."""

    def __init__(
        self, store: Store, changes: list[Changed], values: Values, complete: bool
    ) -> None:
        self._store = store
        #: Every object that changed since the previous render, sorted by key.
        self.changes = changes
        #: The values the library was configured with.
        self.values = values
        #: True when this render must produce the whole output and rebuild
        #: any incremental cache (after ``plan``, or after a failed render);
        #: ``changes`` is then not a reliable account of what changed.
        self.complete = complete

    def items(
        self, watch: str, namespace: Optional[str] = None
    ) -> Iterator[tuple[ObjectKey, Object]]:
        """``(key, object)`` for every object of a watch (or of one namespace
        of it), sorted by namespace, then name."""
        for ns, names in self._namespaces(watch, namespace):
            for name, stored in names.items():
                yield ObjectKey(watch, ns, name), stored.value

    def objects(self, watch: str, namespace: Optional[str] = None) -> Iterator[Object]:
        """Every object of a watch (or of one namespace of it), sorted by
        namespace, then name."""
        for _, names in self._namespaces(watch, namespace):
            for stored in names.values():
                yield stored.value

    def _namespaces(
        self, watch: str, namespace: Optional[str]
    ) -> list[tuple[str, dict[str, _Stored]]]:
        objects = self._store.watch_store(watch).sorted()
        if namespace is None:
            return list(objects.items())
        names = objects.get(namespace)
        return [(namespace, names)] if names else []

    def get(self, watch: str, namespace: str, name: str) -> Optional[Object]:
        """One object by namespace and name; ``None`` when absent."""
        stored = self._store.watch_store(watch).get(namespace, name)
        return stored.value if stored else None

    def count(self, watch: str) -> int:
        """How many objects a watch holds (0 for a watch not planned)."""
        store = self._store.watches.get(watch)
        return len(store) if store else 0

    def changes_of(self, watch: str) -> Iterator[Changed]:
        """The changes of one watch."""
        return (change for change in self.changes if change.key.watch == watch)
