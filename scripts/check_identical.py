"""Bit-identity check of a change: b and R of every method as exact floats, before and after.

``run`` trains each method of the checkout at ``--root`` and writes a JSON file; ``compare`` exits 1 when
an R differs. What runs and what is compared: docs/notes/PERFORMANCE.md, "Bit-identity check".
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

FIXED = ["reading=mir_code", "trainer.threads=1", "logger=none", "trainer.progress_bar=false"]  # every run's


def run(root: Path, out: Path, seeds: list[int], methods: list[str] | None, benchmark: str, extra=()) -> None:
    sys.path[:0] = [str(root / "src")]
    import torch
    from hydra import compose, initialize_config_dir

    from clsuite.run.experiment import run_experiment

    torch.set_num_threads(1)
    methods = methods or sorted(p.stem for p in (root / "conf" / "method").glob("*.yaml"))
    R = {}
    with tempfile.TemporaryDirectory() as tmp, initialize_config_dir(str(root / "conf"), version_base="1.3"):
        for m in methods:
            for s in seeds:
                c = compose("config", overrides=[f"method={m}", f"benchmark={benchmark}", f"seed={s}", *FIXED, *extra])
                res = run_experiment(c, Path(tmp) / f"{m}_{s}")
                R[f"{m}/{s}"] = [res["b"], *res["R"]]  # b (random-init row), then R
                print(f"{m} seed {s}: Acc {res['metrics']['acc']:.2f}", flush=True)
    out.write_text(json.dumps({"root": str(root), "benchmark": benchmark, "set": list(extra), "R": R}, indent=1))


def compare(a_path: Path, b_path: Path) -> int:
    fa, fb = json.loads(a_path.read_text()), json.loads(b_path.read_text())
    if (fa["benchmark"], fa.get("set", [])) != (fb["benchmark"], fb.get("set", [])):
        print(
            f"error: the files ran different settings: {fa['benchmark']} {fa.get('set', [])} vs {fb['benchmark']} {fb.get('set', [])}"
        )
        return 2
    a, b = fa["R"], fb["R"]
    if set(a) != set(b):
        print(
            f"error: the files hold different runs: only in {a_path}: {sorted(set(a) - set(b))}, "
            f"only in {b_path}: {sorted(set(b) - set(a))}"
        )
        return 2
    methods = sorted({k.split("/")[0] for k in a})
    bad = 0
    print(f"{'method':8s} {'seeds':>5s}  result")
    for m in methods:
        keys = [k for k in a if k.split("/")[0] == m]
        same = all(a[k] == b[k] for k in keys)  # floats from JSON: exact equality
        if same:
            print(f"{m:8s} {len(keys):5d}  identical")
            continue
        bad += 1
        dmax = max(abs(x - y) for k in keys for ra, rb in zip(a[k], b[k]) for x, y in zip(ra, rb))
        print(f"{m:8s} {len(keys):5d}  DIFFERS: max |dR| = {dmax:.4f} points")
    return 1 if bad else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    r.add_argument("--methods", nargs="+", default=None)
    r.add_argument("--benchmark", default="split_mnist")
    r.add_argument("--set", nargs="+", default=[], help="more overrides, e.g. benchmark.train_per_class=110")
    c = sub.add_parser("compare")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    args = ap.parse_args()
    if args.cmd == "run":
        run(args.root.resolve(), args.out, args.seeds, args.methods, args.benchmark, args.set)
        return 0
    return compare(args.before, args.after)


if __name__ == "__main__":
    sys.exit(main())
