"""Parity of the suite's GSS, iCaRL and HAL with Mammoth's own classes, and of its ER and MIR with MIR's own
code on the CIFAR-10 JPEG copy: the parity record and its tables.

The commands, both sides, the record and its checks: docs/notes/PARITY.md, "Making the record" and "MIR's
code"; docs/INTEGRITY.md, section 8.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import sys
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(HERE), str(ROOT / "src")]

import mammoth_side  # noqa: E402
import mir_side  # noqa: E402
import suite_side  # noqa: E402

from clsuite.analysis.parity import MIR_PINNED, PINNED, RESULTS, tables  # noqa: E402
from clsuite.core.errors import ConfigError, fail  # noqa: E402
from clsuite.run.archive import RecordsError  # noqa: E402

METHODS = ("gss", "icarl", "hal")
BENCHMARKS = ("split_mnist", "split_fmnist")
MIR_METHODS = ("er", "mir")  # beside MIR's own code (--mir), on MIR_BENCHMARK
MIR_BENCHMARK = "split_cifar10_jpeg"
MIR_SUITE = ["memory=100"]  # MIR's script line: --mem_size 100 (per class)


def provenance(mammoth_commit: str | None) -> dict:
    """Where both sides' numbers come from: the suite's commit and code hash, Mammoth's commit (when its
    side runs), the kernels in effect, the CPU (no local path: the record is carried in the repository)."""
    import torch

    from clsuite.config.numerics import in_effect
    from clsuite.run.identity import code_identity
    from clsuite.run.identity import provenance as origin
    from clsuite.run.record import cpu_model

    return {
        "date": dt.date.today().isoformat(),
        "suite_commit": origin()["commit"],
        "suite_dirty": origin()["dirty"],
        "suite_code": code_identity()["hash"],
        "numerics": in_effect(),
        **(
            {"mammoth_commit": mammoth_commit, "mammoth_flipped_means": mammoth_side.flipped_means()}
            if mammoth_commit
            else {}
        ),
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


def mir_cfg(method: str, seed: int, reading: str, suite_extra, per_class):
    """The suite's config of one seed of a row beside MIR's code: ``benchmark=split_cifar10_jpeg method=<m>
    memory=100 seed=<s>`` (and N training images per class for a smoke test)."""
    small = [f"benchmark.train_per_class={per_class}"] if per_class else []
    return suite_side.compose(method, MIR_BENCHMARK, seed, reading, [*MIR_SUITE, *suite_extra, *small])


def measure_mir(root: Path, cfg, per_class, logs: Path, suite: dict | None = None):
    """One seed of a row beside MIR's code (``{"seed", "suite": {"R", "acc"[, "from"]}, "mir": {"R", "acc"}}``)
    and its settings: the suite's run of ``cfg`` (``suite``: its side read from a record, not trained) and MIR's
    er_main.py on the same archive (not the same split: docs/notes/PARITY.md, "MIR's code")."""
    suite = suite or suite_side.suite_acc(cfg)
    ref = mir_side.run(root, cfg.method.name, cfg.seed, data_root=cfg.data.root, numerics=cfg.trainer.numerics,
                       image_folder=dict(cfg.benchmark.image_folder), train_per_class=per_class, keep=logs)  # fmt: skip
    settings = {"memory_per_class": int(cfg.memory), "batch_size": int(cfg.batch_size),
                "replay_size": int(cfg.replay_size), "lr": float(cfg.lr), "mir_argv": ref["argv"],
                "train_per_class": per_class}  # fmt: skip
    side = {k: suite[k] for k in ("R", "acc", "from") if k in suite}
    return {"seed": cfg.seed, "suite": side, "mir": {"R": ref["R"], "acc": ref["acc"]}}, settings


def _pinned(flag, name, root, is_checkout, lacks, url, pinned, commit_of) -> str | None:
    """The checkout's commit, or None after its ``error:`` line (not that code's checkout, or not a git one);
    a commit other than the pinned one is a warning."""
    if not is_checkout:
        fail(f"{flag} {root} is not a {name} checkout ({lacks}); clone {url} and check out {pinned}")
        return None
    commit = commit_of(root)
    if commit is None:
        fail(f"{flag} {root}: not a git checkout (its commit names the record)")
    elif commit != pinned:
        print(f"warning: {name} at {commit}, not the pinned {pinned}", file=sys.stderr)
    return commit


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mammoth", help=f"a Mammoth checkout (pinned: {PINNED}): GSS, iCaRL, HAL")
    ap.add_argument("--mir", help=f"a MIR checkout (pinned: {MIR_PINNED}): ER, MIR on {MIR_BENCHMARK}")
    ap.add_argument("--methods", nargs="+", choices=METHODS + MIR_METHODS,
                    help="default: GSS, iCaRL, HAL with --mammoth; ER, MIR with --mir")  # fmt: skip
    ap.add_argument("--benchmarks", nargs="+", default=list(BENCHMARKS), choices=BENCHMARKS, help="Mammoth's side")
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4], help="Mammoth's side")
    ap.add_argument("--mir-seeds", nargs="+", type=int, default=[0, 1, 2], help="MIR's side")
    ap.add_argument("--mir-train-per-class", type=int, default=None, metavar="N",
                    help="a smoke test: N training images per class on both sides of the MIR rows")  # fmt: skip
    ap.add_argument("--reading", default="mir_code")
    ap.add_argument("--suite", nargs="*", default=[], metavar="KEY=VALUE", help="overrides of the suite side only")
    ap.add_argument("--suite-from", metavar="EXPERIMENT",
                    help="MIR rows: the suite's side read from the sealed runs of this record (e.g. cifar10_jpeg_row), "
                         "not trained")  # fmt: skip
    ap.add_argument(
        "--records", default=str(ROOT / "docs" / "records"), help="with --suite-from (default: %(default)s)"
    )
    ap.add_argument("--jobs", type=int, default=1, help="with --suite-from: MIR's side runs this many at once")
    ap.add_argument("--out", default=f"results/{RESULTS}", help="the parity record (default: %(default)s)")
    a = ap.parse_args(argv)
    if not a.mammoth and not a.mir:
        return fail("name a reference: --mammoth <checkout> and/or --mir <checkout>")
    if a.methods is None:
        a.methods = [*(METHODS if a.mammoth else ()), *(MIR_METHODS if a.mir else ())]
    lacking = [m for m in a.methods if (m in METHODS and not a.mammoth) or (m in MIR_METHODS and not a.mir)]
    if lacking:
        need = f"need{'s' if len(lacking) == 1 else ''} {'--mammoth' if lacking[0] in METHODS else '--mir'}"
        return fail(f"--methods {' '.join(lacking)} {need}")
    a.methods, a.benchmarks, a.seeds = (list(dict.fromkeys(v)) for v in (a.methods, a.benchmarks, a.seeds))
    a.mir_seeds = list(dict.fromkeys(a.mir_seeds))
    if a.suite_from and (not a.mir or any(m in METHODS for m in a.methods) or a.mir_train_per_class):
        return fail("--suite-from reads the suite's side of the MIR rows (--mir, --methods er mir), at full size "
                    "(no --mir-train-per-class)")  # fmt: skip
    if a.jobs < 1 or (a.jobs > 1 and not a.suite_from):
        return fail(f"--jobs {a.jobs}: a whole number from 1, above 1 only with --suite-from (the suite's side "
                    "trains in this process)")  # fmt: skip
    if not any(s.startswith("trainer.numerics=") for s in a.suite):
        a.suite = ["trainer.numerics=portable", *a.suite]
    commit = mir_commit = None
    if a.mammoth:
        root = Path(a.mammoth).expanduser()
        commit = _pinned(
            "--mammoth", "Mammoth", root, (root / "models" / "gss.py").is_file(), "no models/gss.py",
            "https://github.com/aimagelab/mammoth", PINNED, mammoth_side.checkout_commit,
        )  # fmt: skip
        if commit is None:
            return 2
    if a.mir:
        mir_root = Path(a.mir).expanduser().resolve()
        mir_commit = _pinned(
            "--mir", "MIR", mir_root, mir_side.is_checkout(mir_root), "no er_main.py, data.py, mir.py, buffer.py",
            "https://github.com/optimass/Maximally_Interfered_Retrieval", MIR_PINNED, mir_side.checkout_commit,
        )  # fmt: skip
        if mir_commit is None:
            return 2

    import torch

    from clsuite.config.numerics import apply

    mammoth_methods = [m for m in a.methods if m in METHODS]
    mir_methods = [m for m in a.methods if m in MIR_METHODS]
    try:
        n = a.mir_train_per_class  # (composed here, once: Hydra composes in one thread at a time)
        cfgs = {(m, s): mir_cfg(m, s, a.reading, a.suite, n) for m in mir_methods for s in a.mir_seeds}
        first = (suite_side.compose(mammoth_methods[0], a.benchmarks[0], a.seeds[0], a.reading, a.suite)
                 if mammoth_methods else next(iter(cfgs.values())))  # fmt: skip
        recorded = {}  # (method, seed): the suite's side read from a record, every one found before any run
        if a.suite_from:
            runs = suite_side.recorded_runs(Path(a.records), a.suite_from)
            recorded = {k: suite_side.recorded(runs, cfg, a.suite_from) for k, cfg in cfgs.items()}
    except (ConfigError, RecordsError) as e:
        return fail(str(e))
    apply(first.trainer.numerics)  # before this process's first torch computation, as a run does
    torch.set_num_threads(1)
    classes = mammoth_side.load(root) if mammoth_methods else None
    out, prov = Path(a.out), provenance(commit)
    if mir_commit:  # MIR's side: its commit and every change its code needed here (scripts/parity/mir_side.py)
        prov.update(mir_commit=mir_commit, mir_patches=mir_side.patches())
    small = [f"benchmark.train_per_class={a.mir_train_per_class}"] if a.mir_train_per_class else []
    logs = out.parent / "mir_logs"
    plan = [  # per row: its head, seeds, reference (key, name), one seed's (pair, settings)
        ({"method": m, "benchmark": b, "reading": a.reading, "suite_overrides": a.suite}, a.seeds, "mammoth",
         "Mammoth", lambda m, b, s: measure(m, b, s, a.reading, a.suite, classes))
        for m in mammoth_methods for b in a.benchmarks
    ] + [
        ({"method": m, "benchmark": MIR_BENCHMARK, "reading": a.reading, "reference": "mir",
          "suite_overrides": [*MIR_SUITE, *a.suite, *small], **({"suite_from": a.suite_from} if a.suite_from else {})},
         a.mir_seeds, "mir", "MIR's code",
         lambda m, b, s: measure_mir(mir_root, cfgs[m, s], n, logs, recorded.get((m, s))))
        for m in mir_methods
    ]  # fmt: skip
    done = {}  # (row, seed): its pair

    def finished() -> list[dict]:  # the rows with a finished seed, each with those seeds, in the plan's order
        return [{**row, "seeds": [done[i, s] for s in seeds if (i, s) in done]}
                for i, (row, seeds, *_) in enumerate(plan) if any((i, s) in done for s in seeds)]  # fmt: skip

    def keep(i: int, seed: int, pair: dict, settings: dict) -> None:
        row, _, ref, name, _ = plan[i]
        row["settings"], done[i, seed] = settings, pair
        print(f"{row['method']} {row['benchmark']} seed {seed}: suite {pair['suite']['acc']:.2f}, {name} "
              f"{pair[ref]['acc']:.2f}", file=sys.stderr, flush=True)  # fmt: skip
        write(out, prov, finished(), complete=False)  # a stopped harness keeps every finished pair

    work = [(i, s) for i, (_, seeds, *_) in enumerate(plan) for s in seeds]
    one = lambda i, s: plan[i][4](plan[i][0]["method"], plan[i][0]["benchmark"], s)  # noqa: E731
    if a.jobs == 1:
        for i, s in work:
            keep(i, s, *one(i, s))
    else:  # MIR's side only (--suite-from): each seed a child process of its own
        with ThreadPoolExecutor(a.jobs) as pool:
            futures = {pool.submit(one, i, s): (i, s) for i, s in work}
            try:
                for f in as_completed(futures):
                    keep(*futures[f], *f.result())
            except BaseException:
                pool.shutdown(cancel_futures=True)
                raise
    record = write(out, prov, finished(), complete=True)
    print("\n\n".join(t.markdown() for t in tables(record)))
    print(f"(every R and Acc: {out})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
