"""Small frozen values for the model's typed API, without ``dataclasses``.

The command line decides through these types, and its cold start stays within a
few milliseconds of a bare script: ``dataclasses`` imports ``inspect``, which
alone costs more than an evaluation. A :class:`Value` lists its fields in
``__slots__``, sets each once in ``__init__`` (:meth:`Value._set`), and compares,
hashes and prints by them, as a frozen dataclass does.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class Value:
    """A frozen value whose fields are its ``__slots__``, in order."""

    __slots__: tuple[str, ...] = ()

    def _set(self, **values: Any) -> None:
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __setattr__(self, name: str, value: object) -> None:
        raise _frozen(name)

    def __delattr__(self, name: str) -> None:
        raise _frozen(name)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()  # type: ignore[attr-defined, no-any-return]

    def __hash__(self) -> int:
        return hash((self.__class__.__name__, self._values()))

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{self.__class__.__name__}({shown})"

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # copies and pickles go through __init__, which checks the values again
        return (self.__class__, self._values())


def _frozen(name: str) -> Exception:
    # imported only when someone tries to change a value: never on the way to a decision
    from dataclasses import FrozenInstanceError

    return FrozenInstanceError(f"cannot assign to field {name!r}")
