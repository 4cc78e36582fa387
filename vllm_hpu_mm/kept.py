"""A property worked out on its first read and kept on the object: :func:`functools.cached_property` without the lock
Python 3.11 takes on every first read (about half a microsecond; a plan reads a few hundred thousand such properties
once each: its padded times, its loads' own seconds). Python 3.12 dropped that lock; this is the same descriptor
without it. Objects are never shared between threads while they are planned."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar, overload

__all__ = ["kept_property"]

_T = TypeVar("_T")


class kept_property(Generic[_T]):
    """``func(obj)`` worked out on the first read of the attribute and stored in the object's ``__dict__``, where
    every later read finds it (a non-data descriptor: the instance's value wins). Works on frozen dataclasses, as
    :func:`functools.cached_property` does."""

    def __init__(self, func: Callable[[Any], _T]) -> None:
        self._func = func
        self._name = func.__name__
        self.__doc__ = func.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> kept_property[_T]: ...

    @overload
    def __get__(self, obj: object, owner: type | None = None) -> _T: ...

    def __get__(self, obj: object | None, owner: type | None = None) -> kept_property[_T] | _T:
        if obj is None:
            return self
        value = self._func(obj)
        obj.__dict__[self._name] = value
        return value
