"""A key's declaration: its kind, range, choices and meaning (docs/CONFIG.md, "Adding a key").

The run's keys are declared in ``clsuite.config.schema.KEYS``. A replay, update or plugin class declares
its own keys where it takes them, each constructor parameter annotated ``Annotated[type, Spec]``
(:func:`params`): one declaration that the config check, ``--help`` and docs/CONFIG.md all read.
"""

from __future__ import annotations

import functools
import inspect
import math
import re
import typing
from dataclasses import dataclass

from clsuite.core.errors import ConfigError

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")  # names that become folder names


@dataclass(frozen=True)
class Spec:
    """One key: its kind, range (``lo``/``hi``, open or closed), choices, null allowed, meaning."""

    kind: str  # whole | real | flag | choice | name | text | path | names | shape | notes
    doc: str = ""
    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False
    choices: tuple = ()
    null: bool = False
    req: bool = True  # must be present in the composed config (else: only checked where present)

    def range(self) -> str:
        """'a whole number >= 1 or null', 'in [0, 1)', 'true or false', 'one of a, b', ..."""
        nul = " or null" if self.null else ""
        if self.kind in ("whole", "real"):
            what = "a whole number" if self.kind == "whole" else "a finite number"
            fmt = "{:d}" if self.kind == "whole" else "{:g}"
            lo = fmt.format(self.lo) if self.lo is not None else None
            hi = fmt.format(self.hi) if self.hi is not None else None
            if lo is not None and hi is not None:
                b = f"in {'(' if self.lo_open else '['}{lo}, {hi}{')' if self.hi_open else ']'}"
                return f"{what} {b}{nul}" if self.kind == "whole" else f"in {b[3:]}{nul}"
            if lo is not None:
                return f"{what} {'>' if self.lo_open else '>='} {lo}{nul}"
            return f"{what}{nul}"
        return {
            "flag": f"true or false{nul}",
            "choice": f"one of {choices_text(self.choices)}{nul}",
            "name": f"a name of letters, digits, '_', '.', '-'{nul}",
            "text": f"a string{nul}",
            "path": f"a folder path{nul}",
            "names": "a list of strings",
            "shape": "a list of whole numbers >= 1 (channels, height, width)",
            "notes": "a mapping of key names to strings",
        }[self.kind]

    def problem(self, key: str, v) -> str | None:
        """The error line for value ``v`` of ``key``, or None when it is valid."""
        if v is None and self.null:
            return None
        if self.kind == "choice":
            ok = any(v == c and type(v) is type(c) for c in self.choices)
            valid = choices_text((*self.choices, "null") if self.null else self.choices)
            return None if ok else f"unknown {key} {v!r}; valid choices: {valid}"
        bad = f"{key} must be {self.range()}, got {v!r}"
        if self.kind == "whole":
            if isinstance(v, float) and math.isfinite(v) and v == int(v) and self._inside(v):
                return f"{bad} (write {int(v)})"  # 50.0 would be a second identity of 50
            return None if isinstance(v, int) and not isinstance(v, bool) and self._inside(v) else bad
        if self.kind == "real":
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
                return f"{key} must be a finite number, got {v!r}"
            return None if self._inside(v) else bad
        if self.kind == "flag":
            return None if isinstance(v, bool) else bad
        if self.kind == "name":
            return None if isinstance(v, str) and NAME.match(v) else bad
        if self.kind in ("text", "path"):
            return None if isinstance(v, str) and (v or self.kind == "text") else bad
        if self.kind == "names":
            return None if isinstance(v, list) and all(isinstance(s, str) for s in v) else bad
        if self.kind == "notes":
            ok = isinstance(v, dict) and all(isinstance(k, str) and isinstance(s, str) for k, s in v.items())
            return None if ok else bad
        if self.kind == "shape":
            ok = isinstance(v, list) and 1 <= len(v) <= 3 and all(type(s) is int and s >= 1 for s in v)
            return None if ok else bad
        raise ValueError(f"unknown spec kind {self.kind!r}")

    def _inside(self, v) -> bool:
        lo_ok = self.lo is None or (v > self.lo if self.lo_open else v >= self.lo)
        hi_ok = self.hi is None or (v < self.hi if self.hi_open else v <= self.hi)
        return lo_ok and hi_ok


def choices_text(choices) -> str:
    """The choices as written on the command line, each once (``inf``: the string and Hydra's float)."""
    return ", ".join(dict.fromkeys(str(c).lower() if isinstance(c, bool) else str(c) for c in choices))


def Whole(lo=None, hi=None, doc="", **kw) -> Spec:
    return Spec("whole", doc, lo=lo, hi=hi, **kw)


def Real(lo=None, hi=None, doc="", **kw) -> Spec:
    return Spec("real", doc, lo=lo, hi=hi, **kw)


def Flag(doc="", **kw) -> Spec:
    return Spec("flag", doc, **kw)


def OneOf(*choices, doc="", **kw) -> Spec:
    return Spec("choice", doc, choices=tuple(choices), **kw)


@functools.cache
def params(cls) -> dict[str, Spec]:
    """The declared keys of a class's constructor: each parameter annotated ``Annotated[type, Spec]``, in
    the constructor's order (a parameter without a Spec is not a config key)."""
    init = cls.__init__  # (object's own, a slot wrapper, takes no keys)
    try:
        hints = typing.get_type_hints(init, include_extras=True) if inspect.isfunction(init) else {}
    except Exception as e:  # a name only imported under TYPE_CHECKING, a bad annotation: one line, not a traceback
        raise ConfigError(
            f"cannot read the constructor annotations of {cls.__module__}.{cls.__qualname__}: {e}"
        ) from None
    return {k: m for k, h in hints.items() for m in getattr(h, "__metadata__", ()) if isinstance(m, Spec)}
