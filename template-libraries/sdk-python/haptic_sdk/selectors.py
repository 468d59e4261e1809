"""Which objects a watch selects: the Python port of the ``haptic-selectors``
crate, the one rule the host applies everywhere (the API server's filtering
in a cluster, manifest files in ``haptic render`` and ``haptic test``, a kind
two libraries watch with different selectors). Inside the component the host
has already selected; this module is for :class:`haptic_sdk.testing.Harness`,
so a unit test sees what the host would send.

Both implementations run the same cases (``selectors/cases.json`` in the
haptic repository): change the rule there first.

- label selectors: ``app=web,tier!=cache``, ``env in (prod)``, ``!canary``
  (``k8s.io/apimachinery/pkg/labels``);
- field selectors: ``type=kubernetes.io/tls``, ``metadata.name!=x``
  (``k8s.io/apimachinery/pkg/fields``), a missing field read as the API
  server's default for it (:data:`DEFAULTS`);
- :class:`Selection`: a watch's namespace and both selectors, parsed once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional


class SelectorError(ValueError):
    """A selector of a watch does not parse. ``which`` is ``label`` or
    ``field``, ``selector`` the text as the library wrote it."""

    def __init__(self, which: str, selector: str, reason: str) -> None:
        super().__init__(f"invalid {which} selector '{selector}': {reason}")
        self.which = which
        self.selector = selector
        self.reason = reason


@dataclass(frozen=True)
class Default:
    """One defaulted field a field selector can name."""

    api_version: str
    kind: str
    #: Dotted path, as a field selector names it.
    path: str
    #: The value as a field selector compares it.
    value: str
    #: The API server stores it in the object on create, so objects from
    #: files get it too; otherwise it is only the typed zero value a
    #: selector reads.
    stored: bool


#: The API server's defaults for selectable fields, as
#: ``haptic_selectors::defaults::DEFAULTS`` lists them.
DEFAULTS: tuple[Default, ...] = (
    Default("v1", "Secret", "type", "Opaque", True),
    Default("v1", "Pod", "spec.restartPolicy", "Always", True),
    Default("v1", "Pod", "spec.schedulerName", "default-scheduler", True),
    # The ServiceAccount admission plugin (on by default).
    Default("v1", "Pod", "spec.serviceAccountName", "default", True),
    Default("v1", "Pod", "status.phase", "Pending", True),
    Default("v1", "Pod", "spec.hostNetwork", "false", False),
    Default("v1", "Namespace", "status.phase", "Active", True),
    Default("v1", "Node", "spec.unschedulable", "false", False),
    Default("v1", "ReplicationController", "status.replicas", "0", False),
    Default("apps/v1", "ReplicaSet", "status.replicas", "0", False),
    Default("batch/v1", "Job", "status.successful", "0", False),
)


def default_of(api_version: str, kind: str, path: str) -> Optional[str]:
    """The value a selector reads for ``path`` of an object that lacks it."""
    for default in DEFAULTS:
        if (default.api_version, default.kind, default.path) == (api_version, kind, path):
            return default.value
    return None


def apply_defaults(api_version: str, kind: str, obj: dict[str, Any]) -> None:
    """Fills in the stored defaults ``obj`` lacks, in place, as the API
    server does on create. A field present with any value, or a parent that
    is not a mapping, is left alone."""
    for default in DEFAULTS:
        if not default.stored or (default.api_version, default.kind) != (api_version, kind):
            continue
        fields = obj
        *parents, last = default.path.split(".")
        for segment in parents:
            child = fields.setdefault(segment, {})
            if not isinstance(child, dict):
                break
            fields = child
        else:
            fields.setdefault(last, default.value)


# Label selectors --------------------------------------------------------

_OPERATORS = ",()=!<>"


def _lex(selector: str) -> list[tuple[str, str]]:
    """Tokens as ``(kind, text)``: ``word``, ``!``, ``=``, ``!=``, ``(``,
    ``)``, ``,``."""
    tokens: list[tuple[str, str]] = []
    i, n = 0, len(selector)
    while i < n:
        c = selector[i]
        if c.isspace():
            i += 1
        elif c in ",()":
            tokens.append((c, c))
            i += 1
        elif c == "=":
            i += 2 if selector.startswith("==", i) else 1
            tokens.append(("=", "="))
        elif c == "!":
            if selector.startswith("!=", i):
                tokens.append(("!=", "!="))
                i += 2
            else:
                tokens.append(("!", "!"))
                i += 1
        elif c in "<>":
            raise _LabelError(
                f"the '{c}' operator is not supported in label selectors here; "
                "use in/notin with the values"
            )
        else:
            start = i
            while i < n and not selector[i].isspace() and selector[i] not in _OPERATORS:
                i += 1
            tokens.append(("word", selector[start:i]))
    return tokens


class _LabelError(Exception):
    pass


def _describe(token: Optional[tuple[str, str]]) -> str:
    return "the end of the selector" if token is None else f"'{token[1]}'"


def _is_label_value(value: str) -> bool:
    return value == "" or (
        len(value) <= 63
        and value.isascii()
        and all(c.isalnum() or c in "-_." for c in value)
        and value[0].isalnum()
        and value[-1].isalnum()
    )


def _checked_key(key: str) -> str:
    prefix, slash, name = key.partition("/")
    if not slash:
        prefix, name = "", key
    prefix_ok = not slash or (
        0 < len(prefix) <= 253
        and all(
            part
            and all(c.isascii() and (c.islower() or c.isdigit() or c == "-") for c in part)
            and not part.startswith("-")
            and not part.endswith("-")
            for part in prefix.split(".")
        )
    )
    if prefix_ok and name and _is_label_value(name):
        return key
    raise _LabelError(
        f"'{key}' is not a valid label key (an optional DNS prefix and '/', then at most 63 "
        "alphanumerics, '-', '_' or '.', starting and ending alphanumeric)"
    )


def _checked_value(value: str) -> str:
    if _is_label_value(value):
        return value
    raise _LabelError(
        f"'{value}' is not a valid label value (at most 63 alphanumerics, '-', '_' or '.', "
        "starting and ending alphanumeric)"
    )


class LabelSelector:
    """A parsed label selector; the empty one matches everything.
    Requirements are comma-separated and all must hold; ``!=`` and
    ``notin`` also match objects without the label."""

    def __init__(self, selector: str = "") -> None:
        #: ``(key, op, values)`` with op ``exists``, ``!exists``, ``in``, ``notin``.
        self.requirements: list[tuple[str, str, tuple[str, ...]]] = _parse_labels(selector)

    def matches(self, labels: Optional[dict[str, Any]]) -> bool:
        """Whether an object with these labels (``metadata.labels``) is
        selected; a label whose value is not a string counts as absent."""
        for key, op, values in self.requirements:
            found = labels.get(key) if isinstance(labels, dict) else None
            if not isinstance(found, str):
                found = None
            if op == "exists":
                ok = found is not None
            elif op == "!exists":
                ok = found is None
            elif op == "in":
                ok = found is not None and found in values
            else:
                ok = found is None or found not in values
            if not ok:
                return False
        return True


def _parse_labels(selector: str) -> list[tuple[str, str, tuple[str, ...]]]:
    tokens = _lex(selector)
    requirements: list[tuple[str, str, tuple[str, ...]]] = []
    if not tokens:
        return requirements
    pos = 0

    def next_token() -> Optional[tuple[str, str]]:
        nonlocal pos
        token = tokens[pos] if pos < len(tokens) else None
        pos += 1
        return token

    def peek() -> Optional[tuple[str, str]]:
        return tokens[pos] if pos < len(tokens) else None

    while True:
        token = next_token()
        if token is not None and token[0] == "!":
            key_token = next_token()
            if key_token is None or key_token[0] != "word":
                raise _LabelError(f"expected a label key after '!', found {_describe(key_token)}")
            requirements.append((_checked_key(key_token[1]), "!exists", ()))
        elif token is not None and token[0] == "word":
            key = _checked_key(token[1])
            ahead = peek()
            if ahead is None or ahead[0] == ",":
                requirements.append((key, "exists", ()))
            elif ahead[0] in ("=", "!="):
                negated = next_token() == ("!=", "!=")
                ahead = peek()
                if ahead is not None and ahead[0] == "word":
                    value = next_token()[1]  # type: ignore[index]
                elif ahead is None or ahead[0] == ",":
                    value = ""
                else:
                    raise _LabelError(
                        f"expected a value after the operator on '{key}', found {_describe(ahead)}"
                    )
                requirements.append((key, "notin" if negated else "in", (_checked_value(value),)))
            elif ahead == ("word", "in") or ahead == ("word", "notin"):
                next_token()
                requirements.append((key, ahead[1], _value_set(key, next_token)))
            else:
                raise _LabelError(
                    f"expected '=', '==', '!=', 'in' or 'notin' after '{key}', found "
                    f"{_describe(ahead)}"
                )
        else:
            raise _LabelError(f"expected a label key, found {_describe(token)}")
        token = next_token()
        if token is None:
            return requirements
        if token[0] != ",":
            raise _LabelError(f"expected ',' between requirements, found {_describe(token)}")


def _value_set(key: str, next_token: Any) -> tuple[str, ...]:
    if next_token() != ("(", "("):
        raise _LabelError(f"expected '(' after 'in'/'notin' on '{key}'")
    values: list[str] = []
    expect_value = True
    while True:
        token = next_token()
        kind = token[0] if token else None
        if kind == "word" and expect_value:
            values.append(_checked_value(token[1]))
            expect_value = False
        elif kind == "," and not expect_value:
            expect_value = True
        elif kind == ")" and not expect_value:
            return tuple(values)
        elif kind == ")" and not values:
            raise _LabelError(
                f"the value set of '{key}' is empty; 'in' and 'notin' need at least one value"
            )
        else:
            raise _LabelError(
                f"unexpected {_describe(token)} in the value set of '{key}'; write values as (a,b)"
            )


# Field selectors --------------------------------------------------------


class FieldSelector:
    """A parsed field selector; the empty one matches everything.
    Comma-separated requirements that must all hold, ``=``/``==`` or ``!=``;
    a field the object lacks reads as the API server's default for it when
    ``api_version``/``kind`` are given, else as the empty string."""

    def __init__(self, selector: str = "", api_version: str = "", kind: str = "") -> None:
        #: ``(path, value, equal, default)``.
        self.requirements: list[tuple[tuple[str, ...], str, bool, str]] = []
        if not selector.strip():
            return
        for part in (p.strip() for p in selector.split(",")):
            if not part:
                raise _FieldError("it has an empty requirement; remove the extra ','")
            for operator, equal in (("!=", False), ("==", True), ("=", True)):
                field, found, value = part.partition(operator)
                if found:
                    break
            else:
                raise _FieldError(
                    f"requirement `{part}` needs `=`, `==` or `!=` (e.g. `type=kubernetes.io/tls`)"
                )
            field = field.strip()
            if not field or "" in field.split("."):
                raise _FieldError(
                    f"requirement `{part}` names no field (use a dotted path like `metadata.name`)"
                )
            default = default_of(api_version, kind, field) or ""
            self.requirements.append((tuple(field.split(".")), value.strip(), equal, default))

    def is_empty(self) -> bool:
        return not self.requirements

    def matches(self, obj: Any) -> bool:
        """True when every requirement holds for ``obj``."""
        for path, value, equal, default in self.requirements:
            found: Any = obj
            for segment in path:
                found = found.get(segment) if isinstance(found, dict) else None
            if isinstance(found, bool):
                text = "true" if found else "false"
            elif isinstance(found, (str, int, float)):
                text = str(found)
            else:
                text = default
            if (text == value) != equal:
                return False
        return True


class _FieldError(Exception):
    pass


def parse_label_selector(selector: str) -> LabelSelector:
    """Parses a label selector; :class:`SelectorError` says what is wrong."""
    try:
        return LabelSelector(selector)
    except _LabelError as error:
        raise SelectorError("label", selector, str(error)) from None


def parse_field_selector(selector: str, api_version: str = "", kind: str = "") -> FieldSelector:
    """Parses a field selector for objects of ``api_version``/``kind``;
    :class:`SelectorError` says what is wrong."""
    try:
        return FieldSelector(selector, api_version, kind)
    except _FieldError as error:
        raise SelectorError("field", selector, str(error)) from None


class Selection:
    """A watch's namespace, label selector and field selector, parsed once.
    ``namespace`` ``None`` or empty means every namespace; absent or blank
    selectors select everything."""

    def __init__(
        self,
        api_version: str,
        kind: str,
        namespace: Optional[str] = None,
        label_selector: Optional[str] = None,
        field_selector: Optional[str] = None,
    ) -> None:
        self.namespace = namespace or None
        self.labels = parse_label_selector(label_selector or "")
        self.fields = parse_field_selector(field_selector or "", api_version, kind)

    def matches(self, obj: dict[str, Any]) -> bool:
        """Whether the watch selects ``obj``, reading its namespace and
        labels from its metadata."""
        metadata = obj.get("metadata") if isinstance(obj, dict) else None
        metadata = metadata if isinstance(metadata, dict) else {}
        namespace = metadata.get("namespace") or ""
        return (
            (self.namespace is None or self.namespace == namespace)
            and self.labels.matches(metadata.get("labels"))
            and self.fields.matches(obj)
        )
