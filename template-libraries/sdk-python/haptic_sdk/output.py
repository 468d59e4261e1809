"""The output builder: sections, snippets, files and status patches under
stable keys, turned into a delta against the previous render."""

from __future__ import annotations

import enum
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Union

from .errors import RenderError


class SectionKind(str, enum.Enum):
    """HAProxy configuration section kinds. Anywhere a kind is taken, its
    keyword (``"frontend"``) works too."""

    GLOBAL = "global"
    DEFAULTS = "defaults"
    FRONTEND = "frontend"
    BACKEND = "backend"
    LISTEN = "listen"
    USERLIST = "userlist"
    RESOLVERS = "resolvers"
    PEERS = "peers"
    CACHE = "cache"
    RING = "ring"
    HTTP_ERRORS = "http-errors"


class Slot(str, enum.Enum):
    """Where lines added to another library's section go. HAProxy evaluates
    rules of one kind in order, so slots follow the section's own body in
    this order."""

    ACLS = "acls"
    REQUEST_RULES = "request-rules"
    RESPONSE_RULES = "response-rules"
    ROUTING = "routing"
    OTHER = "other"


class StatusVariant(str, enum.Enum):
    """Which moment of the deploy a status patch belongs to."""

    RENDERED = "rendered"
    DEPLOYED = "deployed"
    RENDER_FAILED = "render-failed"
    DEPLOY_FAILED = "deploy-failed"


@dataclass(frozen=True)
class Section:
    """A whole section this library owns."""

    kind: SectionKind
    name: str
    body: str


@dataclass(frozen=True)
class Snippet:
    """Lines added into a section some library owns."""

    target_kind: SectionKind
    target_name: str
    slot: Slot
    priority: int
    lines: str


@dataclass(frozen=True)
class File:
    """A file next to haproxy.cfg; its path is relative to that directory."""

    path: str
    content: str


@dataclass(frozen=True)
class StatusPatch:
    """A server-side-apply patch of an object's ``status``; ``status`` is a
    JSON object, serialized."""

    variant: StatusVariant
    api_version: str
    kind: str
    namespace: str
    name: str
    status: str


Item = Union[Section, Snippet, File, StatusPatch]


@dataclass
class Delta:
    """What one render sends the host."""

    #: ``upserts`` is the whole output; the host drops what it held before.
    complete: bool = False
    #: New or changed ``(key, item)`` pairs, in the order they were emitted.
    upserts: list[tuple[str, Item]] = field(default_factory=list)
    #: Keys of items that are gone, sorted.
    removals: list[str] = field(default_factory=list)


@dataclass
class _Sent:
    """What the SDK remembers of an item it sent: a fingerprint of its
    content rather than the content, so the output is not held twice (once
    here, once by the host)."""

    fingerprint: bytes
    #: The render that last emitted it.
    seen: int
    #: The render that first emitted it.
    born: int


def _fingerprint(item: Item) -> bytes:
    # repr of a frozen dataclass of strings, ints and str-enums is exact.
    return hashlib.blake2b(repr(item).encode(), digest_size=16).digest()


def section_key(kind: SectionKind | str, name: str) -> str:
    """The key :meth:`Output.section` uses."""
    return f"section:{SectionKind(kind).value}:{name}"


def file_key(path: str) -> str:
    """The key :meth:`Output.file` uses."""
    return f"file:{path}"


def status_key(
    variant: StatusVariant | str, api_version: str, kind: str, namespace: str, name: str
) -> str:
    """The key :meth:`Output.status_patch` uses."""
    return f"status:{StatusVariant(variant).value}:{api_version}:{kind}:{namespace}/{name}"


class Output:
    """Collects one render's output.

    Every item has a key that is stable across renders, derived from the
    item's identity (``section:backend:default_web_8080``,
    ``file:maps/hosts.map``, ``status:deployed:v1:Pod:ns/name``; snippets by
    target, slot, priority and a hash of their lines) unless the library
    gives one (``snippet(..., key=...)``, :meth:`put`).

    By default a render emits its whole output and the SDK sends the host
    only what differs from the previous render. After
    :meth:`retain_previous` the previous output is kept and the render only
    upserts and removes.
    """

    def __init__(self, sent: dict[str, _Sent] | None = None, render: int = 1) -> None:
        self._sent: dict[str, _Sent] = sent if sent is not None else {}
        self._render = render
        self._retain = False
        self._upserts: list[tuple[str, Item]] = []
        self._removed: list[str] = []

    def retain_previous(self) -> None:
        """Keeps every item of the previous render that this render does not
        replace or remove. On a complete render the previous output is empty,
        so the library must emit everything."""
        self._retain = True

    def section(self, kind: SectionKind | str, name: str, body: str) -> None:
        """Adds a whole section, keyed ``section:<kind>:<name>``. ``name`` is
        empty for ``global`` and an unnamed ``defaults``."""
        kind = SectionKind(kind)
        self.put(section_key(kind, name), Section(kind, name, body))

    def snippet(
        self,
        target_kind: SectionKind | str,
        target_name: str,
        slot: Slot | str,
        lines: str,
        *,
        priority: int = 0,
        key: str | None = None,
    ) -> None:
        """Adds lines into a section another library (or this one) defines.

        Within a slot, snippets sort by ``priority`` (ascending), then by
        library order, then by key. Give a ``key`` (one per object, say) to
        replace or remove the snippet later in retain mode.
        """
        item = Snippet(SectionKind(target_kind), target_name, Slot(slot), int(priority), lines)
        if key is None:
            digest = hashlib.blake2b(lines.encode(), digest_size=8).hexdigest()
            base = (
                f"snippet:{item.target_kind.value}:{target_name}:{item.slot.value}:"
                f"{item.priority}:{digest}"
            )
            # Identical snippets are legal; number repeats so each keeps a key.
            key, n = base, 1
            while self.emitted(key):
                n += 1
                key = f"{base}~{n}"
        self.put(key, item)

    def file(self, path: str, content: str) -> None:
        """Adds an auxiliary file (a map, a pattern list, an error page),
        keyed ``file:<path>``."""
        self.put(file_key(path), File(path, content))

    def status_patch(
        self,
        variant: StatusVariant | str,
        api_version: str,
        kind: str,
        namespace: str,
        name: str,
        status: dict[str, Any],
    ) -> None:
        """Adds a status patch, keyed
        ``status:<variant>:<apiVersion>:<kind>:<namespace>/<name>``. ``status``
        holds only the fields this variant's field manager should own; it is
        serialized with sorted keys, so equal dicts give equal patches."""
        variant = StatusVariant(variant)
        serialized = json.dumps(status, sort_keys=True, separators=(",", ":"))
        self.put(
            status_key(variant, api_version, kind, namespace, name),
            StatusPatch(variant, api_version, kind, namespace, name, serialized),
        )

    def put(self, key: str, item: Item) -> None:
        """Adds any item under an explicit key. Emitting one key twice in a
        render is an error."""
        fingerprint = _fingerprint(item)
        sent = self._sent.get(key)
        if sent is not None:
            if sent.seen == self._render:
                raise RenderError(
                    f"two output items share the key `{key}`: each section, file and status "
                    "patch may be emitted once per render"
                )
            sent.seen = self._render
            if sent.fingerprint == fingerprint:
                return
            sent.fingerprint = fingerprint
        else:
            self._sent[key] = _Sent(fingerprint, self._render, self._render)
        self._upserts.append((key, item))

    def remove(self, key: str) -> None:
        """Removes an item of the previous render (retain mode)."""
        sent = self._sent.pop(key, None)
        if sent is None:
            return
        if sent.seen == self._render:
            self._upserts = [(k, item) for k, item in self._upserts if k != key]
        # An item born in this render never reached the host.
        if sent.born != self._render:
            self._removed.append(key)

    def remove_section(self, kind: SectionKind | str, name: str) -> None:
        """Removes a section of the previous render (retain mode)."""
        self.remove(section_key(kind, name))

    def remove_file(self, path: str) -> None:
        """Removes a file of the previous render (retain mode)."""
        self.remove(file_key(path))

    def remove_status_patch(
        self, variant: StatusVariant | str, api_version: str, kind: str, namespace: str, name: str
    ) -> None:
        """Removes a status patch of the previous render (retain mode)."""
        self.remove(status_key(variant, api_version, kind, namespace, name))

    def emitted(self, key: str) -> bool:
        """Whether this render already emitted ``key``."""
        sent = self._sent.get(key)
        return sent is not None and sent.seen == self._render

    def _finish(self, complete: bool) -> tuple[dict[str, _Sent], Delta]:
        """What was sent, and the delta to send."""
        if not self._retain:
            for key in [k for k, sent in self._sent.items() if sent.seen != self._render]:
                del self._sent[key]
                self._removed.append(key)
        removals = [] if complete else sorted(self._removed)
        return self._sent, Delta(complete, self._upserts, removals)
