"""The output builder: sections, snippets, files, status patches, warnings
and owned objects under stable keys, turned into a delta against the
previous render."""

from __future__ import annotations

import enum
import hashlib
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional, Union

from .errors import RenderError

if TYPE_CHECKING:
    from .keys import ObjectKey


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
    #: The body is secret text (see :meth:`Output.secret_section`).
    secret: bool = False


@dataclass(frozen=True)
class Snippet:
    """Lines added into a section some library owns."""

    target_kind: SectionKind
    target_name: str
    slot: Slot
    priority: int
    lines: str
    #: The lines are secret text (see :meth:`Output.secret_snippet`).
    secret: bool = False


@dataclass(frozen=True)
class File:
    """A file next to haproxy.cfg; its path is relative to that directory."""

    path: str
    content: str
    #: The file holds key material (see :meth:`Output.secret_file`).
    secret: bool = False


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


@dataclass(frozen=True)
class Warning:  # noqa: A001 - the contract's name; the builtin is not used here
    """A problem with the input the library worked around (see
    :meth:`Output.warning`)."""

    object: Optional["ObjectKey"]
    reason: str
    message: str


@dataclass(frozen=True)
class OwnedObject:
    """An object the host applies in the cluster, owned by a watched
    object (see :meth:`Output.owned_object`); ``manifest`` is a JSON
    object, serialized."""

    owner: "ObjectKey"
    api_version: str
    kind: str
    name: str
    manifest: str


Item = Union[Section, Snippet, File, StatusPatch, Warning, OwnedObject]


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


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


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

    def secret_section(self, kind: SectionKind | str, name: str, body: str) -> None:
        """Adds a whole section whose body is secret text, such as a
        ``userlist`` of password hashes. HAProxy needs such text in
        haproxy.cfg itself (a userlist cannot come from a file); the host
        shows each body line as its first word and ``<redacted>`` in
        ``haptic render``, fixture reports, validation errors and logs, and
        writes haproxy.cfg with mode 0600 while it holds any. Check hashes
        with :func:`haptic_sdk.crypt.check_password_hash`."""
        kind = SectionKind(kind)
        self.put(section_key(kind, name), Section(kind, name, body, secret=True))

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
            digest = _digest(lines)
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

    def secret_snippet(
        self,
        key: str,
        target_kind: SectionKind | str,
        target_name: str,
        slot: Slot | str,
        lines: str,
        *,
        priority: int = 0,
    ) -> None:
        """Adds a snippet whose lines are secret text (an ``Authorization``
        value a backend needs), under a key the library chooses; shown
        redacted as for a :meth:`secret_section`. Keep other lines in
        snippets of their own so they stay readable."""
        item = Snippet(
            SectionKind(target_kind), target_name, Slot(slot), int(priority), lines, secret=True
        )
        self.put(key, item)

    def file(self, path: str, content: str) -> None:
        """Adds an auxiliary file (a map, a pattern list, an error page),
        keyed ``file:<path>``."""
        self.put(file_key(path), File(path, content))

    def secret_file(self, path: str, content: str) -> None:
        """Adds a file that holds key material (a certificate with its
        private key), keyed ``file:<path>``: the host writes it with mode
        0600 and never shows its content in logs, errors or test reports."""
        self.put(file_key(path), File(path, content, secret=True))

    def warning(self, object: Optional["ObjectKey"], reason: str, message: str) -> None:
        """Reports a problem with ``object`` that the library worked around
        (a missing TLS Secret served with the default certificate, say). The
        host logs it when it first appears or changes and, in a cluster,
        records a Kubernetes Event of type Warning on the object. Emit it on
        every render while the problem lasts; it is gone when a render no
        longer emits it. ``reason`` is CamelCase (``TLSSecretMissing``);
        ``message`` is one sentence for a person and must never contain key
        material. Keyed ``warning:<reason>:<watch>:<namespace>/<name>:<hash
        of the message>``."""
        about = f"{object.watch}:{object.namespace}/{object.name}" if object else ""
        self.put(
            f"warning:{reason}:{about}:{_digest(message)}", Warning(object, reason, message)
        )

    def owned_object(
        self,
        owner: "ObjectKey",
        api_version: str,
        kind: str,
        name: str,
        manifest: dict[str, Any],
    ) -> None:
        """Asks the host to keep an object applied in the cluster, owned by
        the watched object ``owner`` (a Service per Gateway, say), keyed
        ``owned:<apiVersion>:<kind>:<name>``. ``manifest`` holds the fields
        the library owns (``spec``, ``metadata.labels``, ...); the host adds
        apiVersion, kind, name, the owner's namespace and an ownerReference,
        server-side applies it under the field manager ``haptic-owned``, and
        deletes it when no render emits it any more. It never touches an
        object of that name it did not create. The kind must be in the
        plan's ``applies``. In ``haptic render`` and ``haptic run`` it is
        shown or written, not applied, so never put a Secret's data here."""
        serialized = json.dumps(manifest, sort_keys=True, separators=(",", ":"))
        self.put(
            f"owned:{api_version}:{kind}:{name}",
            OwnedObject(owner, api_version, kind, name, serialized),
        )

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
