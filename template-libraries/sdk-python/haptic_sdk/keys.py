"""The key of one watched object: below everything that names objects
(errors, output, the store), so none of them imports the store for it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class ObjectKey:
    """Identifies one watched object."""

    #: The watch the object belongs to.
    watch: str
    #: Empty for cluster-scoped objects.
    namespace: str
    name: str

    def __str__(self) -> str:
        if not self.namespace:
            return f"{self.watch} {self.name}"
        return f"{self.watch} {self.namespace}/{self.name}"
