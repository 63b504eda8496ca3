"""The ``clsuite`` command's verbs (:data:`VERBS`), each a thin dispatch to the function that does the
work (what each does: ``clsuite help``; docs/GUIDE.md, "As a package").
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable

from clsuite.core.errors import fail


def _run(argv: list[str]) -> int:
    from clsuite.cli import main

    main(argv)  # exits with its own status on failure
    return 0


def _sweep(argv: list[str]) -> int:
    return _run(argv if {"-m", "--multirun"} & set(argv) else ["-m", *argv])


def _call(target: str) -> Callable[[list[str]], int]:
    """The verb whose work is ``module:function`` (imported when the verb runs)."""
    module, function = target.split(":")
    return lambda argv: getattr(importlib.import_module(module), function)(argv)


def _help(argv: list[str]) -> int:
    """``clsuite help``: what ``clsuite --help`` prints; ``clsuite help VERB``: that verb's own help."""
    if not argv or argv[0] in ("run", "sweep"):
        from clsuite.config.help import help_text

        print(help_text())
        return 0
    if argv[0] not in VERBS:
        return fail(f"unknown verb {argv[0]!r}; valid choices: {', '.join(VERBS)}")
    try:
        return VERBS[argv[0]](["--help"])
    except SystemExit as e:  # argparse's --help
        return int(e.code or 0)


VERBS: dict[str, Callable[[list[str]], int]] = {
    "run": _run,
    "sweep": _sweep,
    "paper": _call("clsuite.paper:main"),
    "eval": _call("clsuite.run.evaluation:main"),
    "aggregate": _call("clsuite.analysis.report:main_aggregate"),
    "report": _call("clsuite.analysis.report:main_report"),  # from the working directory's multirun/
    "records": _call("clsuite.analysis.records:main"),  # pack runs into docs/records/, check the report against them
    "replay": _call("clsuite.run.replay:main"),  # rerun a sample of the records' portable runs here
    "claims": _call("clsuite.analysis.report:main_claims"),
    "choices": _call("clsuite.analysis.choices:main"),
    "wandb": _call("clsuite.analysis.wandb_sync:main"),
    "help": _help,
}


def split_verb(argv: list[str]) -> tuple[str, list[str]]:
    """``(verb, the rest)``; no verb first means ``run``."""
    if argv and argv[0] in VERBS:
        return argv[0], argv[1:]
    return "run", argv


# Environment variables earlier versions read, and the key that replaced each (docs/GUIDE.md, "Resume and reuse").
RETIRED_ENV = {
    "CLSUITE_REUSE": "reuse=false",
    "CLSUITE_RESUME": "resume=...",
    "CLSUITE_CHECKPOINTS": "checkpoint_dir=...",
    "CLSUITE_CACHE_DIR": "data.cache_dir=...",
    "CLSUITE_GPU": "trainer.device_index=...",
    "CLSUITE_JOBS_PER_GPU": "hydra.launcher.n_jobs=...",
    "CLSUITE_GPU_POOL": "launcher=joblib",
    "CLSUITE_GPU_LOCK_DIR": "TMPDIR",
    "CLSUITE_LOCK_STALE_S": "nothing (a dead holder's lock is freed by the kernel)",
}


def retired_env_notes(env=os.environ) -> list[str]:
    """A ``note:`` line for each retired variable set in ``env``: it is not read any more."""
    return [f"note: {k} is not read any more; use {v}" for k, v in RETIRED_ENV.items() if k in env]


def main(argv: list[str] | None = None) -> None:
    """``clsuite [verb] ...`` (the console script) and ``python src/run.py [verb] ...``."""
    verb, rest = split_verb(sys.argv[1:] if argv is None else list(argv))
    for line in retired_env_notes():
        print(line, file=sys.stderr)
    sys.exit(VERBS[verb](rest))


if __name__ == "__main__":
    main()
