"""The WIT exports (``haptic:template/library@0.3.0``): converts between the
bindings componentize-py generates (the ``wit_world`` module, which exists
only inside the component) and the SDK's own types."""

from __future__ import annotations

import json
import os
import traceback
from typing import Any, Callable, TypeVar

from . import log
from .errors import RenderError
from .library import Library, Plan
from .objects import Applied, Deleted, IncomingChange, ObjectKey
from .output import Delta, File, Item, OwnedObject, Section, Snippet, StatusPatch, Warning
from .runtime import Runtime, check_library_class

try:
    from componentize_py_types import Err
    from wit_world import exports as _exports
    from wit_world.imports import types as w

    _Export: type = _exports.Library
    IN_COMPONENT = True
except ImportError:  # Natively (unit tests): nothing to export to.
    _Export = object
    IN_COMPONENT = False

_SDK_DIR = os.path.dirname(os.path.abspath(__file__))
R = TypeVar("R")


def adapter(library_class: type[Library]) -> type:
    """The class componentize-py calls for ``library_class``."""
    check_library_class(library_class)
    # Made now, so inside the component it is part of the snapshot that
    # componentize-py takes after importing the app: no instance starts
    # by running the library's constructor.
    runtime = Runtime(library_class)

    def guarded(call: Callable[[], R]) -> R:
        try:
            return call()
        except Exception as error:  # noqa: BLE001 - every library error becomes a render error
            log.debug("".join(traceback.format_exception(error)))
            raise Err(_render_error(error)) from None

    class Library(_Export):  # type: ignore[misc, valid-type]
        def describe(self) -> Any:
            return w.LibraryInfo(
                name=library_class.name,
                version=library_class.version,
                order=library_class.order,
                default_values=json.dumps(library_class.defaults, sort_keys=True),
            )

        def configure(self, values: str) -> Any:
            def call() -> Any:
                try:
                    tree = json.loads(values)
                except ValueError as error:
                    raise RenderError(f"values are not JSON: {error}") from None
                return _plan_to_wit(runtime.configure(tree))

            return guarded(call)

        def render(self, changes: list[Any]) -> Any:
            return guarded(lambda: _delta_to_wit(runtime.render(_changes_from_wit(changes))))

    Library.__qualname__ = f"Library[{library_class.__name__}]"
    return Library


def _render_error(error: Exception) -> Any:
    if isinstance(error, RenderError):
        key = error.object
        return w.RenderError(message=error.message, object=_key_to_wit(key))
    return w.RenderError(message=describe_exception(error), object=None)


def describe_exception(error: BaseException) -> str:
    """``KeyError: 'spec' (at app.py:42, in render)``: the exception and the
    innermost line of library code it came from (not the SDK's, not the
    standard library's)."""
    frames = traceback.extract_tb(error.__traceback__)
    outside_sdk = [f for f in frames if not os.path.abspath(f.filename).startswith(_SDK_DIR)]
    frame = (outside_sdk or frames or [None])[-1]
    text = "".join(traceback.format_exception_only(type(error), error)).strip()
    if frame is None:
        return text
    return f"{text} (at {os.path.basename(frame.filename)}:{frame.lineno}, in {frame.name})"


def _changes_from_wit(changes: list[Any]) -> list[IncomingChange]:
    out: list[IncomingChange] = []
    for change in changes:
        if isinstance(change, w.Change_Applied):
            obj = change.value
            key = ObjectKey(obj.key.watch, obj.key.namespace, obj.key.name)
            out.append(Applied(key, obj.resource_version, obj.json))
        else:
            key = change.value
            out.append(Deleted(ObjectKey(key.watch, key.namespace, key.name)))
    return out


def _plan_to_wit(plan: Plan) -> Any:
    return w.Plan(
        watches=[
            w.Watch(
                name=watch.name,
                api_version=watch.api_version,
                kind=watch.kind,
                namespace=watch.namespace,
                label_selector=watch.label_selector,
                field_selector=watch.field_selector,
                ignore_fields=list(watch.ignore_fields),
            )
            for watch in plan.watches
        ],
        patches_status_of=list(plan.patches_status_of),
        applies=list(plan.applies),
    )


def _delta_to_wit(delta: Delta) -> Any:
    return w.RenderOutput(
        complete=delta.complete,
        upserts=[w.KeyedItem(key=key, item=_item_to_wit(item)) for key, item in delta.upserts],
        removals=delta.removals,
    )


def _item_to_wit(item: Item) -> Any:
    # The SDK's enums and the bindings' share member names.
    if isinstance(item, Section):
        return w.Item_Section(
            w.Section(w.SectionKind[item.kind.name], item.name, item.body, item.secret)
        )
    if isinstance(item, Snippet):
        return w.Item_Snippet(
            w.Snippet(
                w.SectionKind[item.target_kind.name],
                item.target_name,
                w.Slot[item.slot.name],
                item.priority,
                item.lines,
                item.secret,
            )
        )
    if isinstance(item, File):
        return w.Item_File(w.AuxFile(item.path, item.content, item.secret))
    if isinstance(item, StatusPatch):
        return w.Item_StatusPatch(
            w.StatusPatch(
                w.StatusVariant[item.variant.name],
                item.api_version,
                item.kind,
                item.namespace,
                item.name,
                item.status,
            )
        )
    if isinstance(item, Warning):
        return w.Item_Warning(w.Warning(_key_to_wit(item.object), item.reason, item.message))
    if isinstance(item, OwnedObject):
        return w.Item_OwnedObject(
            w.OwnedObject(
                _key_to_wit(item.owner), item.api_version, item.kind, item.name, item.manifest
            )
        )
    raise RenderError(f"{type(item).__name__} is not an output item (a bug in the library)")


def _key_to_wit(key: ObjectKey | None) -> Any:
    return w.ObjectKey(key.watch, key.namespace, key.name) if key else None
