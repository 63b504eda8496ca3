"""The ``clsuite`` command's verbs, each a thin dispatch to the function that does the work.

    clsuite [run] [overrides]         one run (no verb = run): clsuite.cli.main
    clsuite sweep [overrides]         a sweep (Hydra multirun, = clsuite -m ...): clsuite.cli.main
    clsuite paper TARGET [...]        a paper table or figure, sweep + tables (= make TARGET): clsuite.paper.main
    clsuite aggregate EXP [...]       tables and figures of multirun/EXP/: clsuite.analysis.report.main_aggregate
    clsuite report [--docs]           the reproduction report from multirun/: clsuite.analysis.report.main_report
    clsuite claims [--rule R]         the paper's claims judged from multirun/, printed: clsuite.analysis.report.main_claims
    clsuite choices                   the paper's open choices, paired by seed: clsuite.analysis.choices.main
    clsuite wandb EXP [...]           W&B runs and charts from results files: clsuite.wandb_sync.main
    clsuite help [VERB]               the verbs and the config keys (= clsuite --help), or one verb's options

A checkout runs the same functions as ``python src/run.py [verb] ...``; ``python -m clsuite [verb] ...``
works wherever the package is importable. ``clsuite.home.hint`` names the form that works where the
process runs.

An argument that is a verb only counts as one in the first place; overrides always hold ``=``
(``method=mir``) and options start with ``-``, so neither is taken for a verb.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable


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
        from clsuite.confighelp import help_text

        print(help_text())
        return 0
    if argv[0] not in VERBS:
        print(f"error: unknown verb {argv[0]!r}; valid choices: {', '.join(VERBS)}", file=sys.stderr)
        return 2
    try:
        return VERBS[argv[0]](["--help"])
    except SystemExit as e:  # argparse's --help
        return int(e.code or 0)


VERBS: dict[str, Callable[[list[str]], int]] = {
    "run": _run,
    "sweep": _sweep,
    "paper": _call("clsuite.paper:main"),
    "aggregate": _call("clsuite.analysis.report:main_aggregate"),
    "report": _call("clsuite.analysis.report:main_report"),  # from the working directory's multirun/
    "claims": _call("clsuite.analysis.report:main_claims"),
    "choices": _call("clsuite.analysis.choices:main"),
    "wandb": _call("clsuite.wandb_sync:main"),
    "help": _help,
}


def split_verb(argv: list[str]) -> tuple[str, list[str]]:
    """``(verb, the rest)``; no verb first means ``run``."""
    if argv and argv[0] in VERBS:
        return argv[0], argv[1:]
    return "run", argv


def main(argv: list[str] | None = None) -> None:
    """``clsuite [verb] ...`` (the console script) and ``python src/run.py [verb] ...``."""
    verb, rest = split_verb(sys.argv[1:] if argv is None else list(argv))
    sys.exit(VERBS[verb](rest))


if __name__ == "__main__":
    main()
