"""The class a template library subclasses, and what it plans to watch."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from .objects import Context
    from .output import Output
    from .values import Values

from .watch import MANAGED_FIELDS, Plan, Watch  # noqa: F401 - re-exported, as before the split



class Library:
    """A template library. Subclass it, set the class attributes, override
    :meth:`plan` and :meth:`render`, and export it with
    :func:`haptic_sdk.export`.

    One instance lives as long as the WebAssembly instance: caches kept on
    ``self`` survive between renders. The host calls :meth:`plan` whenever
    the values change and :meth:`render` whenever watched objects changed.
    After ``plan``, or after a failed render, the next render is *complete*
    (``ctx.complete``): incremental caches must be rebuilt from ``ctx``'s
    objects.
    """

    #: Kebab-case name, e.g. ``maintenance-mode``; its camelCase form
    #: (``maintenanceMode``) is the library's key in the values tree.
    name: ClassVar[str]
    #: The library's own version.
    version: ClassVar[str] = "0.1.0"
    #: Libraries render and merge in ascending order; ties break by name.
    #: The bundled ones use 0-200, so custom ones go above.
    order: ClassVar[int] = 100
    #: Default values (a JSON object), merged under the user's values.
    defaults: ClassVar[dict[str, Any]] = {}

    def plan(self, values: Values) -> Plan:
        """What the library watches for these values. The default watches
        nothing, for libraries that render from values alone."""
        return Plan()

    def render(self, ctx: Context, out: Output) -> None:
        """Writes the library's output for the current objects and values.

        By default ``out`` expects the whole output every time and the SDK
        sends the host only what differs from the previous render. A library
        that tracks changes itself calls ``out.retain_previous()`` and emits
        only what changed.
        """
        raise NotImplementedError(f"{type(self).__name__} must define render(self, ctx, out)")
