"""The error of bad input: a ``ConfigError`` is one line naming the bad value and the valid choices;
the command line prints it as ``error: ...`` (:func:`fail`) and exits with status 2 before any training
(a leaf: every layer may raise it). :func:`import_outside`: a module a config names, its failure as one."""

import importlib
import sys
import traceback


class ConfigError(ValueError):
    pass


def fail(message: str, status: int = 2) -> int:
    """The one way a command says it failed: ``error: <message>`` on stderr; ``status`` (2: bad input),
    for ``return fail(...)`` from a command's ``main`` or ``sys.exit(fail(...))``."""
    print(f"error: {message}", file=sys.stderr)
    return status


def import_outside(module: str, what: str):
    """``module`` imported (named by ``what``: a ``_target_``, a ``benchmark.source``), or None when no
    module of that name exists; one that exists but fails to import (a SyntaxError, an exception raised
    at import, an import of its own that fails) is a ``ConfigError`` naming the module, the line of its
    code where the import failed and the exception's first line."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name is not None and f"{module}.".startswith(f"{e.name}."):  # it, or a package above it
            return None
        failure = e
    except (Exception, SystemExit) as e:  # (SystemExit: e.g. an argparse run at import)
        failure = e
    if isinstance(failure, SyntaxError):
        where, why = (failure.filename, failure.lineno), failure.msg
    else:  # the innermost module-level line on the way: the outside code's own line that raised
        top = [f for f in traceback.extract_tb(failure.__traceback__) if f.name == "<module>"]
        where, why = (top[-1].filename, top[-1].lineno) if top else (None, None), str(failure)
    at = f" at {where[0]}, line {where[1]}" if where[0] else ""
    first = " ".join((why or "").strip().split("\n")[0].split())
    exc = f"{type(failure).__name__}: {first}" if first else type(failure).__name__
    raise ConfigError(f"{what}: importing {module} failed{at}: {exc}") from None
