"""A read-only attribute that the Python wrapper of an engine object takes from the engine object itself.

``Topology`` and ``Machine`` wrap the compiled objects (``self._core``); most of their attributes are the engine's
own, read as they are. :class:`CoreAttr` states one such attribute in one line (its name, type and docstring)
instead of a property whose body repeats ``return self._core.<name>``.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar, overload

T = TypeVar("T")


class CoreAttr(Generic[T]):
    """``name = CoreAttr[type]("docstring")`` in a class whose instances hold their engine object in ``_core``: reading
    ``obj.name`` returns ``obj._core.name``; it cannot be set."""

    def __init__(self, doc: str):
        self.__doc__ = doc
        self._name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> CoreAttr[T]: ...
    @overload
    def __get__(self, obj: object, owner: type | None = None) -> T: ...
    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        return getattr(obj._core, self._name)

    def __set__(self, obj: object, value: object) -> None:
        raise AttributeError(f"{self._name}: read-only")
