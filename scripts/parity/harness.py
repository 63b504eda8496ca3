"""Parity of the suite's GSS, iCaRL and HAL with Mammoth's own classes: the table of docs/PARITY.md.

    make parity MAMMOTH=/path/to/mammoth                  # = the command below with the defaults
    python scripts/parity/harness.py --mammoth /path/to/mammoth \\
        [--methods gss icarl hal] [--benchmarks split_mnist split_fmnist] [--seeds 0 1 2 3 4] \\
        [--reading mir_code] [--suite KEY=VALUE ...] [--out results/parity/parity.json]

Mammoth is not part of the suite and is never copied into it: clone it anywhere and check out
the pinned commit (``git clone https://github.com/aimagelab/mammoth && git -C mammoth checkout
e75a491``); another commit runs with a warning. Steps, per (method, benchmark, seed):

1. the suite's config (``suite_side.compose``: the reading, one torch thread) and its materials:
   the seed's split, the network's initial weights, each task's batches in the suite's order;
2. the suite's own run of that config: its Acc (``suite_side.suite_acc``);
3. Mammoth's unmodified class on the same materials (``mammoth_side.run``): its Acc;
4. per (method, benchmark): suite - Mammoth per seed, the mean with a 95% Student-t interval
   (``clsuite.analysis.stats.paired``), both sides' mean +- sd, the paper's Table II value.

Both sides run in one process, one torch thread, under ``trainer.numerics=portable`` (docs/PARITY.md;
``--suite trainer.numerics=native``: this machine's own kernels). Prints the Markdown table and writes
every number (what docs/PARITY.md lists, and the suite's code hash) to ``--out`` after every pair: a
stopped harness keeps what it finished (``complete``: false). ``--suite KEY=VALUE``: the one-change
diagnostics of docs/PARITY.md (``replay_loss=concat``, ...); ``PARITY_NOFLIP=1``: Mammoth's iCaRL
without the flipped class means. Exit 2 with one ``error:`` line when the checkout is missing or not
Mammoth's. Slow: one suite run and one Mammoth run per seed (GSS about a minute each on one core).
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

METHODS = ("gss", "icarl", "hal")
BENCHMARKS = ("split_mnist", "split_fmnist")


def table(rows: list[dict]) -> str:
    """docs/PARITY.md's table: one line per (method, benchmark)."""
    import numpy as np

    from clsuite.analysis import paper_values as pv
    from clsuite.analysis.stats import paired

    def ms(v):
        return f"{np.mean(v):.1f} +- {np.std(v, ddof=1) if len(v) > 1 else 0.0:.1f} (n={len(v)})"

    out = ["| method | benchmark | suite Acc | Mammoth Acc | suite - Mammoth, mean [95% CI] | per seed | paper |",
           "|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        s = {int(k): v for k, v in r["suite"].items()}
        m = {int(k): v for k, v in r["mammoth"].items()}
        d = paired(s, m)
        per = ", ".join(f"{s[k] - m[k]:+.1f}" for k in sorted(set(s) & set(m)))
        paper = pv.table2_value(r["benchmark"], r["method"], "acc")
        out.append(f"| {r['method']} | {r['benchmark']} | {ms(list(s.values()))} | {ms(list(m.values()))} | "
                   f"{d.interval()} (n={d.n}) | {per} | {'' if paper is None else paper} |")  # fmt: skip
    return "\n".join(out)


def provenance(mammoth: Path) -> dict:
    import subprocess

    import torch

    from clsuite.experiment import cpu_model
    from clsuite.identity import code_identity
    from clsuite.numerics import in_effect

    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    return {
        "date": dt.datetime.now().isoformat(timespec="seconds"),
        "suite_commit": commit.strip() or None,
        "suite_code": code_identity(),
        "numerics": in_effect(),
        "mammoth": str(mammoth),
        "mammoth_commit": mammoth_side.checkout_commit(mammoth),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "cpu": cpu_model(),
        "platform": platform.platform(),
        "argv": sys.argv,
    }


def write(out: Path, prov: dict, rows: list[dict], complete: bool) -> None:
    """Every number so far, atomically (``complete``: false until the last pair is done)."""
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps({"provenance": prov, "complete": complete, "rows": rows}, indent=1))
    tmp.replace(out)


def measure(method: str, benchmark: str, seed: int, reading: str, suite_extra, classes) -> tuple[float, float]:
    cfg = suite_side.compose(method, benchmark, seed, reading, suite_extra)
    mat = suite_side.materials(cfg)
    suite = suite_side.suite_acc(cfg)["acc"]
    ref = mammoth_side.run(classes, method, mat, seed)["acc"] if classes else float("nan")
    return suite, ref


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mammoth", required=True, help=f"a Mammoth checkout (pinned: {mammoth_side.PINNED})")
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    ap.add_argument("--benchmarks", nargs="+", default=list(BENCHMARKS), choices=BENCHMARKS)
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    ap.add_argument("--reading", default="mir_code")
    ap.add_argument("--suite", nargs="*", default=[], metavar="KEY=VALUE", help="overrides of the suite side only")
    ap.add_argument("--out", default="results/parity/parity.json")
    a = ap.parse_args(argv)
    if not any(s.startswith("trainer.numerics=") for s in a.suite):
        a.suite = ["trainer.numerics=portable", *a.suite]
    root = Path(a.mammoth).expanduser()
    if not (root / "models" / "gss.py").is_file():
        print(f"error: --mammoth {root} is not a Mammoth checkout (no models/gss.py); clone "
              f"https://github.com/aimagelab/mammoth and check out {mammoth_side.PINNED}", file=sys.stderr)  # fmt: skip
        return 2
    commit = mammoth_side.checkout_commit(root)
    if commit != mammoth_side.PINNED:
        print(
            f"warning: Mammoth at {commit or 'an unknown commit'}, not the pinned {mammoth_side.PINNED}",
            file=sys.stderr,
        )

    import torch

    from clsuite.numerics import apply

    first = suite_side.compose(a.methods[0], a.benchmarks[0], a.seeds[0], a.reading, a.suite)
    apply(first.trainer.numerics)  # before this process's first torch computation, as a run does
    torch.set_num_threads(1)
    classes = mammoth_side.load(root)
    rows, out, prov = [], Path(a.out), provenance(root)
    out.parent.mkdir(parents=True, exist_ok=True)
    for method in a.methods:
        for bench in a.benchmarks:
            row = {"method": method, "benchmark": bench, "reading": a.reading, "suite_overrides": a.suite,
                   "suite": {}, "mammoth": {}}  # fmt: skip
            for seed in a.seeds:
                s, m = measure(method, bench, seed, a.reading, a.suite, classes)
                row["suite"][seed], row["mammoth"][seed] = s, m
                print(f"{method} {bench} seed {seed}: suite {s:.2f}, Mammoth {m:.2f}", file=sys.stderr, flush=True)
                write(out, prov, [*rows, row], complete=False)  # a stopped harness keeps every finished pair
            rows.append(row)
    write(out, prov, rows, complete=True)
    print(table(rows))
    print(f"\n(every number: {out})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
