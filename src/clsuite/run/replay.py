"""``clsuite replay``: rerun a random sample of the records' portable runs on this machine and compare
R and b bit for bit with the records (README, "Checking the report"; docs/INTEGRITY.md, section 8).

    clsuite replay [--records docs/records] [--sample 5] [--seed 0] [--methods online,er] [--benchmarks split_mnist]
"""

from __future__ import annotations

import argparse
import random
import re
import tempfile
import time
from pathlib import Path

from clsuite.config.home import CHECKOUT, data_dir
from clsuite.core.errors import fail
from clsuite.run import archive as rec
from clsuite.run.io import RESULTS_FILE

PORTABLE = "portable"


def pool(root: Path, methods: set[str] | None, benchmarks: set[str] | None) -> tuple[dict[str, list], list[str]]:
    """Step 1 on records unpacked under ``root``: ``({identity key: [(record name, results)]}, refusals)``."""
    from clsuite.run.results import read_run

    groups: dict[str, list] = {}
    refused = []
    for path in sorted(root.glob(f"*/*/{RESULTS_FILE}")):
        name = path.parent.relative_to(root).as_posix()
        run = read_run(path)
        if not run.ok:
            refused.append(f"{name}: {run.reason}")
            continue
        res = run.data
        mode = ((res["identity"].get("env") or {}).get("numerics") or {}).get("mode")
        if mode != PORTABLE or (methods and res["method"] not in methods):
            continue
        if benchmarks and res["benchmark"] not in benchmarks:
            continue
        groups.setdefault(res["identity"]["key"], []).append((name, res))
    return groups, refused


def first_difference(got: dict, want: dict) -> str | None:
    """The first cell of R (row by row), then of b, whose value differs, as ``R[i,j] = x here, y in the
    record`` (1-based); None when R and b are equal bit for bit."""
    for what in ("R", "b"):
        a, b = got[what], want[what]
        rows = (a, b) if what == "R" else ([a], [b])
        if len(rows[0]) != len(rows[1]):
            return f"{what} has {len(rows[0])} rows here, {len(rows[1])} in the record"
        for i, (ra, rb) in enumerate(zip(*rows), 1):
            if len(ra) != len(rb):
                return f"{what} row {i} has {len(ra)} cells here, {len(rb)} in the record"
            for j, (x, y) in enumerate(zip(ra, rb), 1):
                if x != y:  # (floats read back from JSON: equal values are equal bits)
                    cell = f"R[{i},{j}]" if what == "R" else f"b[{j}]"
                    return f"{cell} = {x!r} here, {y!r} in the record"
    return None


def cpu_kind(model: str | None) -> str:
    """A CPU model name without its clock (``Intel(R) Xeon(R) Processor @ 2.50GHz`` -> ``Intel(R) Xeon(R)
    Processor``): the kind of CPU, which is what decides whether a replay crosses machines."""
    return re.sub(r"\s*@.*$", "", model or "unknown").strip() or "unknown"


def machine_line(here: str, theirs: list[str | None]) -> str:
    """Whether this replay is a cross-machine check: this CPU's kind against the CPU kinds of the drawn
    records (their sealed ``versions.cpu``). A bit-for-bit match on another CPU kind is what shows that the
    portable kernels make R independent of the machine; on the records' own CPU kind it only shows that the
    code and the records agree."""
    kinds = sorted({cpu_kind(c) for c in theirs})
    if kinds == [cpu_kind(here)]:
        return f"same CPU kind as the records ({kinds[0]}): a same-machine check"
    return f"this CPU: {cpu_kind(here)}; the records': {', '.join(kinds)}: a cross-machine check"


def replay(res: dict, out: Path, data_dir: str) -> dict:
    """Step 3 for one record: its config as recorded, with only keys that cannot change R changed."""
    from omegaconf import OmegaConf

    from clsuite.run.experiment import run_experiment
    from clsuite.run.results import as_today

    cfg = OmegaConf.create(as_today(res["config"]))
    cfg.data.root, cfg.data.download = data_dir, False
    cfg.trainer.accelerator, cfg.trainer.progress_bar = "cpu", False
    cfg.logger, cfg.checkpoint, cfg.keep_weights = {"name": "none"}, "off", False
    return run_experiment(cfg, out / "run", checkpoint_dir=out / "checkpoints")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="clsuite replay", description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--records", default=str(CHECKOUT / "docs" / "records"), help="a records folder (default docs/records)"
    )
    ap.add_argument("--sample", type=int, default=5, help="how many runs to rerun (default 5; more than the pool: all)")
    ap.add_argument("--seed", type=int, default=0, help="the draw's seed (default 0)")
    ap.add_argument("--methods", metavar="A,B", help="only these methods (e.g. online,er: the cheapest)")
    ap.add_argument("--benchmarks", metavar="A,B", help="only these benchmarks")
    ap.add_argument(
        "--data-dir",
        default=data_dir(),
        help="the data sets (default: $DATA_DIR, else ../shared/datasets when it exists, else data/: every command's rule)",
    )
    a = ap.parse_args(argv)
    if a.sample < 1:
        return fail(f"--sample must be a whole number >= 1, got {a.sample}")
    if not Path(a.records).is_dir():
        return fail(f"--records {a.records}: not a folder (records: clsuite records pack)")
    methods, benchmarks = (set(x.split(",")) if x else None for x in (a.methods, a.benchmarks))
    with tempfile.TemporaryDirectory(prefix="clsuite-replay-") as tmp:
        try:
            rec.extract(Path(a.records), Path(tmp) / "records")
        except rec.RecordsError as e:
            return fail(f"{e}; nothing replayed", 1)
        groups, refused = pool(Path(tmp) / "records", methods, benchmarks)
        for line in refused:
            fail(f"{line}; nothing replayed")
        if refused:
            return 1
        if not groups:
            return fail(f"no {PORTABLE} run in {a.records} of the methods and benchmarks asked; nothing replayed")
        keys = sorted(random.Random(a.seed).sample(sorted(groups), min(a.sample, len(groups))),
                      key=lambda k: groups[k][0][0])  # fmt: skip
        of = len(groups), sum(map(len, groups.values()))
        return _replay_all([groups[k] for k in keys], of, Path(tmp), a)


def _replay_all(drawn: list[list], of: tuple[int, int], tmp: Path, a: argparse.Namespace) -> int:
    """Steps 3-4; ``of``: the pool's runs and records."""
    from clsuite.config.numerics import apply, check
    from clsuite.core.errors import ConfigError

    try:
        apply(PORTABLE)  # before this process's first torch computation
        check(PORTABLE)
    except ConfigError as e:
        return fail(str(e))
    from clsuite.run.record import cpu_model

    here, records = cpu_model(), sum(map(len, drawn))
    print(f"replaying {len(drawn)} of the {of[0]} {PORTABLE} runs ({of[1]} records) of {a.records} (--seed {a.seed}) "
          f"on {here}, R and b compared bit for bit (R[i,j]: after task i, on task j)")  # fmt: skip
    print(machine_line(here, [r["versions"].get("cpu") for group in drawn for _, r in group]))
    bad = 0
    for i, group in enumerate(drawn):
        t0 = time.perf_counter()
        try:
            got = replay(group[0][1], tmp / f"replay{i}", a.data_dir)
        except Exception as e:  # a run that cannot be replayed here (its data missing, an error)
            bad += len(group)
            for name, _ in group:
                print(f"failed   {name}: {type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}")
            continue
        took = f"({time.perf_counter() - t0:.0f} s)"
        for name, want in group:
            diff = first_difference(got, want)
            bad += diff is not None
            code = got["identity"]["code"]["hash"], want["identity"]["code"]["hash"]
            made = f"; recorded by code {code[1]} on {want['versions'].get('cpu')}, here code {code[0]}"
            print(f"same     {name} {took}" if diff is None else f"differs  {name}: {diff}{made}")
    print(f"{len(drawn)} runs replayed = {records} records (a run can be a record of several experiments): "
          f"{records - bad} the same, {bad} not")  # fmt: skip
    return 1 if bad else 0
