"""Parity of the suite's GSS, iCaRL and HAL with Mammoth's own classes: the parity record and its table.

The commands, both sides, the record and its checks: docs/notes/PARITY.md, "Making the record";
docs/INTEGRITY.md, section 8.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(HERE), str(ROOT / "src")]

import mammoth_side  # noqa: E402
import suite_side  # noqa: E402

from clsuite.analysis.parity import PINNED, RESULTS, table  # noqa: E402

METHODS = ("gss", "icarl", "hal")
BENCHMARKS = ("split_mnist", "split_fmnist")


def provenance(mammoth_commit: str) -> dict:
    """Where both sides' numbers come from: the suite's commit and code hash, Mammoth's commit, the
    kernels in effect, the CPU (no local path: the record is carried in the repository)."""
    import torch

    from clsuite.config.numerics import in_effect
    from clsuite.run.experiment import cpu_model
    from clsuite.run.identity import code_identity
    from clsuite.run.identity import provenance as origin

    return {
        "date": dt.date.today().isoformat(),
        "suite_commit": origin()["commit"],
        "suite_dirty": origin()["dirty"],
        "suite_code": code_identity()["hash"],
        "numerics": in_effect(),
        "mammoth_commit": mammoth_commit,
        "mammoth_flipped_means": mammoth_side.flipped_means(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "cpu": cpu_model(),
        "platform": platform.platform(),
    }


def write(out: Path, prov: dict, rows: list[dict], complete: bool) -> dict:
    """The record so far, written atomically (``complete``: false until the last pair is done)."""
    from clsuite.run.io import write_bytes_atomic

    record = {"provenance": prov, "complete": complete, "rows": rows}
    write_bytes_atomic(out, (json.dumps(record, indent=1) + "\n").encode())
    return record


def measure(method: str, benchmark: str, seed: int, reading: str, suite_extra, classes) -> tuple[dict, dict]:
    """One seed of a row (``{"seed", "suite": {"R", "acc"}, "mammoth": {"R", "acc"}}``) and its settings."""
    cfg = suite_side.compose(method, benchmark, seed, reading, suite_extra)
    mat = suite_side.materials(cfg)
    suite = suite_side.suite_acc(cfg)
    ref = mammoth_side.run(classes, method, mat, seed)
    settings = {"memory_slots": mat.memory_capacity, "batch_size": mat.batch_size, "replay_size": mat.replay_size,
                "lr": mat.lr, "mammoth_args": vars(mammoth_side.mammoth_args(method, mat))}  # fmt: skip
    pair = {
        "seed": seed,
        "suite": {"R": suite["R"], "acc": suite["acc"]},
        "mammoth": {"R": ref["R"], "acc": ref["acc"]},
    }
    return pair, settings


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mammoth", required=True, help=f"a Mammoth checkout (pinned: {PINNED})")
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    ap.add_argument("--benchmarks", nargs="+", default=list(BENCHMARKS), choices=BENCHMARKS)
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    ap.add_argument("--reading", default="mir_code")
    ap.add_argument("--suite", nargs="*", default=[], metavar="KEY=VALUE", help="overrides of the suite side only")
    ap.add_argument("--out", default=f"results/{RESULTS}", help="the parity record (default: %(default)s)")
    a = ap.parse_args(argv)
    a.methods, a.benchmarks, a.seeds = (list(dict.fromkeys(v)) for v in (a.methods, a.benchmarks, a.seeds))
    if not any(s.startswith("trainer.numerics=") for s in a.suite):
        a.suite = ["trainer.numerics=portable", *a.suite]
    root = Path(a.mammoth).expanduser()
    if not (root / "models" / "gss.py").is_file():
        print(f"error: --mammoth {root} is not a Mammoth checkout (no models/gss.py); clone "
              f"https://github.com/aimagelab/mammoth and check out {PINNED}", file=sys.stderr)  # fmt: skip
        return 2
    commit = mammoth_side.checkout_commit(root)
    if commit is None:
        print(f"error: --mammoth {root}: not a git checkout (its commit names the record)", file=sys.stderr)
        return 2
    if commit != PINNED:
        print(f"warning: Mammoth at {commit}, not the pinned {PINNED}", file=sys.stderr)

    import torch

    from clsuite.config.numerics import apply
    from clsuite.core.errors import ConfigError

    try:
        first = suite_side.compose(a.methods[0], a.benchmarks[0], a.seeds[0], a.reading, a.suite)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    apply(first.trainer.numerics)  # before this process's first torch computation, as a run does
    torch.set_num_threads(1)
    classes = mammoth_side.load(root)
    rows, out, prov = [], Path(a.out), provenance(commit)
    for method in a.methods:
        for bench in a.benchmarks:
            row = {"method": method, "benchmark": bench, "reading": a.reading, "suite_overrides": a.suite, "seeds": []}
            for seed in a.seeds:
                pair, row["settings"] = measure(method, bench, seed, a.reading, a.suite, classes)
                row["seeds"].append(pair)
                print(f"{method} {bench} seed {seed}: suite {pair['suite']['acc']:.2f}, Mammoth "
                      f"{pair['mammoth']['acc']:.2f}", file=sys.stderr, flush=True)  # fmt: skip
                write(out, prov, [*rows, row], complete=False)  # a stopped harness keeps every finished pair
            rows.append(row)
    print(table(write(out, prov, rows, complete=True)).markdown())
    print(f"(every R and Acc: {out})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
