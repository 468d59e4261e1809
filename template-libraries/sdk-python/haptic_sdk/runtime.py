"""The library's lifecycle behind the WIT exports: values, the object store,
the previous output and the complete/delta bookkeeping. Independent of the
bindings, so unit tests drive it through :class:`haptic_sdk.testing.Harness`."""

from __future__ import annotations

import json
from typing import Any

from .errors import RenderError
from .library import Library, Plan, Watch
from .objects import Context, IncomingChange, Store
from .output import Delta, Output, Warning, _Sent
from .values import Values

#: The warning reason for an object left out because it is not JSON.
UNREADABLE_REASON = "ObjectUnreadable"


class Runtime:
    """One library instance and everything the SDK keeps for it."""

    def __init__(self, library_class: type[Library]) -> None:
        check_library_class(library_class)
        self.library = library_class()
        self.info = library_class
        self.values = Values({}, library_class.name, library_class.defaults)
        self.store = Store()
        #: Fingerprints of what the host holds.
        self.sent: dict[str, _Sent] = {}
        #: Renders so far, to tell this render's items from older ones.
        self.renders = 0
        #: The next render must send the whole output.
        self.complete_next = True
        #: The `ObjectUnreadable` warnings sent, by item key, with their text.
        self.unreadable_sent: dict[str, str] = {}

    def configure(self, tree: Any) -> Plan:
        """Takes the whole values tree and returns the plan for it."""
        self.complete_next = True
        values = Values(tree, self.info.name, self.info.defaults)
        plan = self.library.plan(values)
        check_plan(plan)
        self.values = values
        self.store.set_plan(plan)
        return plan

    def render(self, changes: list[IncomingChange]) -> Delta:
        """Applies changes and renders. With nothing changed and no complete
        render due, the library is not called at all."""
        try:
            return self._render(changes)
        except BaseException:
            # What was sent was handed to the failed render; start over.
            self.sent = {}
            self.unreadable_sent = {}
            self.complete_next = True
            raise

    def _render(self, changes: list[IncomingChange]) -> Delta:
        complete = self.complete_next
        changed = self.store.apply(changes, track=not complete)
        unreadable = {
            f"warning:{UNREADABLE_REASON}:{key}": (key, why)
            for key, why in self.store.unreadable().items()
        }
        unreadable_changed = {k: why for k, (_, why) in unreadable.items()} != self.unreadable_sent
        if not changed and not complete and not unreadable_changed:
            return Delta()
        sent: dict[str, _Sent] = {} if complete else self.sent
        self.sent = {}
        self.renders += 1
        out = Output(sent, self.renders)
        self.library.render(Context(self.store, changed, self.values, complete), out)
        # After the library: in retain mode its items stay unless removed,
        # so warnings of objects fixed since are removed by key.
        for item_key in self.unreadable_sent:
            if item_key not in unreadable:
                out.remove(item_key)
        self.unreadable_sent = {}
        for item_key, (key, why) in unreadable.items():
            message = f"{why}; the object is left out of the configuration until it is fixed"
            out.put(item_key, Warning(key, UNREADABLE_REASON, message))
            self.unreadable_sent[item_key] = why
        self.sent, delta = out._finish(complete)
        self.complete_next = False
        return delta


def check_library_class(library_class: Any) -> None:
    """Refuses what cannot be a library, saying what to fix."""
    if not (isinstance(library_class, type) and issubclass(library_class, Library)):
        raise TypeError(
            f"{library_class!r} is not a haptic_sdk.Library subclass; "
            "declare it as `class MyLibrary(haptic_sdk.Library)`"
        )
    name = getattr(library_class, "name", None)
    if not isinstance(name, str) or not name:
        raise TypeError(
            f"{library_class.__name__} has no `name`; set a kebab-case class attribute such as "
            '`name = "maintenance-mode"`'
        )
    try:
        if not isinstance(library_class.defaults, dict):
            raise TypeError("it is not a dict")
        json.dumps(library_class.defaults)
    except TypeError as error:
        raise TypeError(
            f"{library_class.__name__}.defaults must be a JSON object (a dict of strings, numbers, "
            f"booleans, lists and dicts): {error}"
        ) from None


def check_plan(plan: Any) -> None:
    if not isinstance(plan, Plan):
        raise RenderError(
            f"plan() returned {type(plan).__name__}, not a haptic_sdk.Plan; "
            "return `Plan(watches=[...])` (a bug in the library)"
        )
    for watch in plan.watches:
        if not isinstance(watch, Watch):
            raise RenderError(
                f"the plan lists {watch!r}, not a haptic_sdk.Watch (a bug in the library)"
            )
