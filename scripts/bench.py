"""`make bench`: every method's cost against ER, side by side in one process (docs/PERFORMANCE.md).

At the ``mir_code`` setting (reading=mir_code: |B_t| = 10, |R| = 10, M = 100 per class) on
split-MNIST (real files: ``DATA_DIR``), one torch thread, the 14 methods of ``conf/method/`` run
one after the other in this process, ``--repeats`` rounds (each round runs every method once,
seed = the round), and the table gives the medians over the rounds of:

- **ms/batch**: time inside training (``train_time_s`` of the results: the fits, task-end work
  such as Fisher or herding included, evaluations excluded) per incoming batch, and that time
  against ER's (**time vs ER**);
- **work vs ER**: the network's forward/backward work per incoming batch against ER's, counted
  with a forward hook on the network (samples through it; a forward whose output requires grad
  is counted as a forward plus a backward, at twice a forward's cost; evaluations not counted).
  time vs ER well above work vs ER is overhead, not the method's work;
- **outside s / %**: the job's time outside its training steps (composing the config, data,
  network, trainer, evaluations, identity, results file: the job's wall time less
  ``train_time_s``) and its share of the job's wall time; **of which evaluations s**: the part
  spent in the protocol's evaluations (b and one row of R per task, on every task's test set).

The first round's jobs pay the process's one-time costs (imports are done before; the first
job reads the data files): round 0 is reported apart as **first job outside s** for ER.
``--root`` measures another checkout (its ``src/`` and ``conf/``) with this same script.

``--numerics native portable`` (``make bench-numerics``) compares the kernel modes of
``trainer.numerics`` (clsuite.numerics): a process pins its kernels once, so each round runs one
child process per mode, the modes alternating, and the table gives each method's median ms/batch
per mode and their ratio to the first mode.

``--benchmark`` picks another benchmark and ``--set KEY=VALUE`` adds overrides to every job, e.g.
the CIFAR-10 JPEG copy on a tenth of its stream (docs/PERFORMANCE.md, "split-CIFAR10 on the CPU"):

    python scripts/bench.py --benchmark split_cifar10_jpeg --set benchmark.train_per_class=500 --repeats 1
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

METHOD_ORDER = (
    "er",
    "online",
    "joint",
    "agem",
    "gem",
    "oewc",
    "si",
    "icarl",
    "hal",
    "gss",
    "mir",
    "ccmr",
    "ebrs",
    "adaer",
)


class WorkCounter:
    """Samples through the network per call, split into forward-only and forward+backward."""

    def __init__(self, net_types):
        self.net_types, self.on = net_types, True
        self.fwd = self.fwd_bwd = 0

    def hook(self, module, inputs, output):
        if not self.on or not isinstance(module, self.net_types):
            return
        x = inputs[0]
        n = _batch_size(x)
        out = output[0] if isinstance(output, tuple) else output
        if getattr(out, "requires_grad", False):
            self.fwd_bwd += n
        else:
            self.fwd += n

    def units(self) -> int:
        return self.fwd + 3 * self.fwd_bwd  # backward = 2 forwards


def _batch_size(x) -> int:
    """Samples in x, also inside torch.func.vmap / grad, where x shows one sample's shape: the
    unwrapped tensor's size over one sample's (a per-sample batch of one inside vmap)."""
    import math

    import torch

    functorch, plain = torch._C._functorch, x
    while functorch.is_batchedtensor(plain) or functorch.is_gradtrackingtensor(plain):
        plain = functorch.get_unwrapped(plain)
    if plain is x:
        return x.shape[0] if x.dim() else 1
    return plain.numel() // max(1, math.prod(x.shape[1:]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3, help="rounds over all methods (seed = round)")
    ap.add_argument("--benchmark", default="split_mnist")
    ap.add_argument("--methods", nargs="+", default=None, help="default: every conf/method/*.yaml (ER first)")
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1], help="the checkout to measure")
    ap.add_argument("--json", type=Path, default=None, help="also write the raw measurements here")
    ap.add_argument("--numerics", nargs="+", default=["native"], help="trainer.numerics mode(s); several: compared")
    ap.add_argument("--first-seed", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)  # one mode's process of compare_numerics
    ap.add_argument("--set", nargs="+", default=[], metavar="KEY=VALUE", help="more overrides for every job")
    args = ap.parse_args()
    if len(args.numerics) > 1:
        return compare_numerics(args)
    root = args.root.resolve()
    sys.path[:0] = [str(root / "src")]
    t_import = time.perf_counter()
    import torch
    from hydra import compose, initialize_config_dir

    import clsuite.callbacks as callbacks
    from clsuite.experiment import cpu_model, run_experiment
    from clsuite.models.nets import MLP, ReducedResNet18
    from clsuite.numerics import apply

    t_import = time.perf_counter() - t_import
    apply(args.numerics[0])  # before the first torch computation of this process
    torch.set_num_threads(1)
    available = sorted(p.stem for p in (root / "conf" / "method").glob("*.yaml"))
    methods = args.methods or sorted(available, key=lambda m: (*METHOD_ORDER, m).index(m))
    if "er" not in methods:
        methods = ["er", *methods]
    unknown = sorted(set(methods) - set(available))
    if unknown:
        print(f"error: unknown method(s) {', '.join(unknown)}; valid: {', '.join(available)}", file=sys.stderr)
        return 2

    counter = WorkCounter((MLP, ReducedResNet18))
    handle = torch.nn.modules.module.register_module_forward_hook(counter.hook)
    evaluate = callbacks.evaluate

    eval_s = [0.0]  # this job's time in evaluations

    def uncounted_evaluate(*a, **kw):  # evaluations are not training work
        counter.on = False
        t0 = time.perf_counter()
        try:
            return evaluate(*a, **kw)
        finally:
            counter.on = True
            eval_s[0] += time.perf_counter() - t0

    callbacks.evaluate = uncounted_evaluate
    rows = {m: [] for m in methods}
    with tempfile.TemporaryDirectory() as tmp, initialize_config_dir(str(root / "conf"), version_base="1.3"):
        for r in range(args.first_seed, args.first_seed + args.repeats):
            for m in methods:
                counter.fwd = counter.fwd_bwd = 0
                eval_s[0] = 0.0
                t0, c0 = time.perf_counter(), time.process_time()
                c = compose(
                    "config",
                    overrides=[
                        f"method={m}",
                        f"benchmark={args.benchmark}",
                        "reading=mir_code",
                        f"seed={r}",
                        "trainer.threads=1",
                        f"trainer.numerics={args.numerics[0]}",
                        "logger=none",
                        "trainer.progress_bar=false",
                        *args.set,
                    ],
                )
                res = run_experiment(c, Path(tmp) / f"{m}_{r}")
                wall, cpu = time.perf_counter() - t0, time.process_time() - c0
                steps = sum(res["steps_per_task"])
                rows[m].append(
                    {
                        "round": r,
                        "wall_s": wall,
                        "cpu_s": cpu,  # this process's CPU time for the whole job: robust to other load
                        "train_s": res["train_time_s"],
                        "eval_s": eval_s[0],
                        "steps": steps,
                        "acc": res["metrics"]["acc"],
                        "work_per_batch": counter.units() / steps,
                    }
                )
                print(f"round {r} {m}: wall {wall:.2f} s, train {res['train_time_s']:.2f} s", file=sys.stderr)
    handle.remove()
    callbacks.evaluate = evaluate

    def med(m, f, rounds=None):
        return statistics.median(f(x) for x in rows[m] if rounds is None or x["round"] in rounds)

    if args.child:  # one process of compare_numerics: the raw rows only
        args.json.write_text(json.dumps({"runs": rows}))
        return 0
    later = set(range(1, args.repeats)) or {0}
    er_t = med("er", lambda x: x["train_s"] / x["steps"])
    er_w = med("er", lambda x: x["work_per_batch"])
    load = os.getloadavg()
    print(
        f"`make bench`: {args.benchmark}, reading=mir_code, 1 thread, {args.repeats} rounds (seeds 0-{args.repeats - 1}),"
        f" {len(methods)} methods in one process; checkout {root}"
        + (f"; overrides {' '.join(args.set)}" if args.set else "")
    )
    print(
        f"CPU: {cpu_model()} ({os.cpu_count()} cores), torch {torch.__version__}, python {platform.python_version()};"
        f" load average at the end {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}; imports {t_import:.2f} s"
    )
    print(
        f"ER's first job (round 0: reads the data files): {rows['er'][0]['wall_s'] - rows['er'][0]['train_s']:.2f} s"
        f" outside training of {rows['er'][0]['wall_s']:.2f} s; medians below over rounds {sorted(later)}\n"
    )
    print(
        "| method | ms/batch | time vs ER | work vs ER | job wall s | outside training s | outside % "
        "| of which evaluations s |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    out = {}
    for m in methods:
        t = med(m, lambda x: x["train_s"] / x["steps"])
        w = med(m, lambda x: x["work_per_batch"])
        wall = med(m, lambda x: x["wall_s"], later)
        outside = med(m, lambda x: x["wall_s"] - x["train_s"], later)
        share = med(m, lambda x: (x["wall_s"] - x["train_s"]) / x["wall_s"], later)
        evals = med(m, lambda x: x["eval_s"], later)
        print(
            f"| {m} | {1e3 * t:.2f} | {t / er_t:.2f} | {w / er_w:.2f} | {wall:.2f} | {outside:.2f} | {100 * share:.0f} "
            f"| {evals:.2f} |"
        )
        out[m] = {"ms_per_batch": 1e3 * t, "time_vs_er": t / er_t, "work_vs_er": w / er_w, "outside_share": share}
    if args.json:
        args.json.write_text(json.dumps({"summary": out, "runs": rows, "load": load}, indent=1))
    return 0


def compare_numerics(args) -> int:
    """Each round: one child process per mode (alternating), every method once; medians per mode."""
    modes, runs = args.numerics, {m: {} for m in args.numerics}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            for mode in modes if r % 2 == 0 else modes[::-1]:  # alternate which mode goes first
                out = Path(tmp) / f"{mode}_{r}.json"
                cmd = [sys.executable, __file__, "--numerics", mode, "--repeats", "1", "--first-seed", str(r), "--child",
                       "--benchmark", args.benchmark, "--root", str(args.root), "--json", str(out)]  # fmt: skip
                if args.methods:
                    cmd += ["--methods", *args.methods]
                if args.set:
                    cmd += ["--set", *args.set]
                if subprocess.run(cmd, check=False).returncode != 0:
                    return 1
                for m, rows in json.loads(out.read_text())["runs"].items():
                    runs[mode].setdefault(m, []).extend(rows)
    load = os.getloadavg()
    print(f"`make bench-numerics`: {args.benchmark}, reading=mir_code, 1 thread, {args.repeats} rounds (seeds 0-"
          f"{args.repeats - 1}), one process per mode and round, modes alternating; load average at the end "
          f"{load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}\n")  # fmt: skip
    print("| method | " + " | ".join(f"ms/batch {m}" for m in modes) + " | " + " | ".join(
        f"{m} / {modes[0]}" for m in modes[1:]) + " | " + " | ".join(f"CPU s/job {m}" for m in modes) + " | "
        + " | ".join(f"CPU {m} / {modes[0]}" for m in modes[1:]) + " |")  # fmt: skip
    print("|---|" + "---:|" * (4 * len(modes) - 2))
    summary = {}
    for m in runs[modes[0]]:
        ms = [1e3 * statistics.median(x["train_s"] / x["steps"] for x in runs[mode][m]) for mode in modes]
        cpu = [statistics.median(x["cpu_s"] for x in runs[mode][m]) for mode in modes]
        print(f"| {m} | " + " | ".join(f"{v:.2f}" for v in ms) + " | " + " | ".join(
            f"{v / ms[0]:.2f}" for v in ms[1:]) + " | " + " | ".join(f"{v:.2f}" for v in cpu) + " | " + " | ".join(
            f"{v / cpu[0]:.2f}" for v in cpu[1:]) + " |")  # fmt: skip
        summary[m] = {"ms_per_batch": dict(zip(modes, ms, strict=True)), "cpu_s": dict(zip(modes, cpu, strict=True))}
    print(
        "\nms/batch: wall time in training per incoming batch (moves with other load); CPU s/job: the job's own "
        "CPU time, start to results file (robust to other load on the machine)."
    )
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "runs": runs, "load": load}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
