"""`make bench`, `make bench-numerics` and the GPU benchmark: each method's cost, side by side in one run.

One measurement per call (``--measure``; the columns: docs/PERFORMANCE.md, docs/GPU.md, docs/CHECKPOINTS.md):

- ``jobs`` (default): the methods of ``conf/method/`` (ER first) as whole jobs (``run_experiment``),
  reading=mir_code, split-MNIST (``DATA_DIR``), one torch thread, ``--repeats`` rounds (seed =
  round): time in training per incoming batch and against ER's, forward/backward work against ER's
  (a forward hook), time outside training and the evaluations' part of it (medians over rounds 1..:
  round 0's first job reads the data files).
- ``stream`` (default with ``--device cuda``): ER, MIR, AdaER made by the suite's ``build()``
  (M = 100, |B_t| = |R| = 20) and driven by a Trainer with ``MemoryUpdate``: ``--warmup`` batches of
  task 0, ``--batches`` timed incoming batches from task 1 on between two ``torch.cuda.synchronize()``,
  one evaluation of every test split, the memory peak, the projected full run. CIFAR-10/100 are
  random images of the real shape and sizes. On CUDA: ``--sync-debug`` (host-device syncs per batch
  by source line), ``--profile`` (GPU busy time per batch; it slows the profiled process's later
  timings: ``--profile-only NAME``).
- ``net``: the network alone: ``--batches`` SGD steps on ``--batch`` samples after ``--warmup``, one
  no-grad forward of ``--eval`` images; CPU and wall time.
- ``checkpoint`` (``make bench``, after the jobs): one task-end checkpoint of a run trained on task 0,
  its memory full: median seconds of ``--repeats`` writes, bytes, seconds to resume.

Side by side: each code tree (``--src NAME=PATH``: a checkout or its ``src/``; ``--root``: the one
checkout) and each ``--numerics`` mode is a variant, measured in its own process (a process pins its
kernels once): one per round, the order alternating (one for all rounds when there is one variant);
the table gives each variant's medians and their ratios to the first's. ``--out DIR``: ``bench.json``
(the rows as they come, then the summary), ``bench.log`` (the processes' output), ``bench.md``.

    make bench BENCH_ARGS="--repeats 2 --methods er gss"
    python scripts/bench.py --benchmark split_cifar10_jpeg --set benchmark.train_per_class=500 --repeats 1
    python scripts/bench.py --measure stream --batches 5 --warmup 6    # the GPU benchmark on the CPU
    python scripts/bench.py --device cuda --src old=.gpu_old/src --src new=src --sync-debug --profile
    python scripts/bench.py --measure net --numerics native --arch mlp --shape 1 28 28
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
METHOD_ORDER = "er online joint agem gem oewc si icarl hal gss mir ccmr ebrs adaer".split()  # noqa: SIM905  # the table's order
DEFAULTS = {  # per measure, for the options left out
    "jobs": dict(repeats=3, benchmark=["split_mnist"], numerics=["native"]),
    "stream": dict(
        repeats=1,
        benchmark=["split_mnist", "split_cifar10", "split_cifar100"],
        methods=["er", "mir", "adaer"],
        warmup=20,
        numerics=[None],
    ),
    "net": dict(repeats=1, numerics=["native", "portable"], warmup=2, batches=10),
    "checkpoint": dict(repeats=5, methods=["adaer"], numerics=[None]),
}
STREAM_BATCHES = {"split_mnist": 150, "split_cifar10": 150, "split_cifar100": 50}  # timed batches (--batches)
RANDOM = {  # stream: random images of the real shape and sizes instead of these sources' files
    "cifar10": dict(num_classes=10, shape=(3, 32, 32), train_per_class=5000, test_per_class=1000),
    "cifar100": dict(num_classes=100, shape=(3, 32, 32), train_per_class=500, test_per_class=100),
}
CIFAR_SYNTHETIC = "+benchmark.synthetic={num_classes:100,shape:[3,32,32],train_per_class:4,test_per_class:2,seed:0}"
CHECKPOINT_CASES = {  # name: overrides
    "split-MNIST (MLP)": ["benchmark=split_mnist", "benchmark.train_per_class=20"],
    "split-CIFAR100 (reduced ResNet-18, synthetic)": [
        "benchmark=split_cifar100",
        "benchmark.source=synthetic",
        CIFAR_SYNTHETIC,
        "benchmark.train_per_class=4",
    ],
}


# ----------------------------------------------------------------------------- driver (no clsuite import)
def main() -> int:
    args = parse()
    if args.child:
        return child(argparse.Namespace(**json.loads(args.child)))
    if args.device == "cuda" and args.measure != "stream":
        return fail(f"--device cuda measures the stream only (--measure stream), not --measure {args.measure}")
    trees = [t.split("=", 1) if "=" in t else ["new", t] for t in args.src or [str(args.root)]]
    trees = [(name, src_dir(Path(path))) for name, path in trees]
    conf = trees[0][1].parent / "conf"
    valid = {kind: sorted(p.stem for p in (conf / kind).glob("*.yaml")) for kind in ("method", "benchmark")}
    if args.measure == "jobs":
        args.methods = args.methods or sorted(valid["method"], key=lambda m: (*METHOD_ORDER, m).index(m))
        args.methods = args.methods if "er" in args.methods else ["er", *args.methods]
    for kind, asked in (("method", args.methods), ("benchmark", args.measure in ("jobs", "stream") and args.benchmark)):
        unknown = sorted(set(asked or []) - set(valid[kind]))
        if unknown:
            return fail(f"unknown {kind}(s) {', '.join(unknown)}; valid: {', '.join(valid[kind])}")
    variants = []
    for (name, src), mode in itertools.product(trees, args.numerics):
        label = " ".join([name] * (len(trees) > 1) + [mode] * (len(args.numerics) > 1)) or name
        variants.append({"version": name, "src": str(src), "numerics": mode, "label": label})
    if args.data_dir:
        os.environ["DATA_DIR"] = args.data_dir
    out = Path(args.out) if args.out else None
    if out:
        out.mkdir(parents=True, exist_ok=True)
    rows, failed = [], False
    rounds = range(args.repeats) if args.measure in ("jobs", "stream") else [0]
    together = len(variants) == 1 and args.measure == "jobs"  # one process: round 0 pays its one-time costs
    with open(out / "bench.log" if out else os.devnull, "a") as log:
        for group in [list(rounds)] if together else [[r] for r in rounds]:
            for v in variants if group[0] % 2 == 0 else variants[::-1]:  # alternate which variant goes first
                failed |= run_child(args, v, group, rows, out, log) != 0
    ok = [r for r in rows if "error" not in r]
    load = os.getloadavg()
    text, summary = REPORTS[args.measure](args, ok, rows, [v["label"] for v in variants], load)
    print(text)
    if out:
        (out / "bench.md").write_text(text + "\n")
    write(out, {"complete": True, "rows": rows, "summary": summary, "load": load})
    return 1 if failed or len(ok) < len(rows) else 0


def run_child(args, v: dict, rounds: list[int], rows: list[dict], out: Path | None, log) -> int:
    """One variant's process for these rounds: its rows into ``rows`` (and bench.json), its output into the log."""
    print(f"== {v['label']} ({v['src']}), round {rounds[0] if len(rounds) == 1 else 'all'}", file=sys.stderr)
    t0 = time.perf_counter()
    spec = json.dumps({**vars(args), "variant": v, "rounds": rounds, "child": None}, default=str)
    cmd = [sys.executable, __file__, "--child", spec]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in proc.stdout:
        log.write(line)
        log.flush()
        if line.startswith("ROW "):
            rows.append(json.loads(line[4:]))
            write(out, {"complete": False, "rows": rows})
            print(f"  {progress(rows[-1])}", file=sys.stderr, flush=True)
        elif not out or "Error" in line or "error:" in line or "Traceback" in line:
            print(line.rstrip(), file=sys.stderr, flush=True)
    proc.wait()
    print(f"   ({v['label']}: {time.perf_counter() - t0:.0f} s, exit {proc.returncode})", file=sys.stderr)
    return proc.returncode


def parse() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--measure", choices=list(DEFAULTS), default=None, help="default: jobs; stream on cuda")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--repeats", type=int, default=None, help="rounds (seed = round); checkpoint: writes")
    ap.add_argument("--benchmark", "--benchmarks", nargs="+", default=None, help="conf/benchmark name(s)")
    ap.add_argument("--methods", nargs="+", default=None, help="jobs: every conf/method/*.yaml (ER first)")
    ap.add_argument("--numerics", nargs="+", default=None, help="trainer.numerics mode(s); several: compared")
    ap.add_argument("--root", type=Path, default=ROOT, help="the checkout to measure")
    ap.add_argument("--src", action="append", default=None, help="NAME=PATH: a code tree to measure (repeatable)")
    ap.add_argument(
        "--set", "--override", nargs="+", action="extend", default=[], metavar="KEY=VALUE", help="for every job"
    )
    ap.add_argument("--out", default=None, help="write bench.json, bench.log and bench.md here")
    ap.add_argument("--data-dir", default=None, help="DATA_DIR for the runs (default: the environment's)")
    ap.add_argument("--batches", type=int, default=None, help=f"stream: timed batches ({STREAM_BATCHES}); net: steps")
    ap.add_argument("--warmup", type=int, default=None, help="stream: batches of task 0 (20); net: steps (2)")
    ap.add_argument("--sync-debug", action="store_true", help="stream on cuda: the host-device syncs per batch")
    ap.add_argument("--profile", action="store_true", help="stream on cuda: GPU busy time per batch (torch.profiler)")
    ap.add_argument("--profile-only", default=None, help="profile only the code tree of this name")
    ap.add_argument("--debug-batches", type=int, default=8, help="batches under --sync-debug, --profile")
    ap.add_argument("--cudnn-benchmark", action="store_true", help="torch.backends.cudnn.benchmark = True")
    ap.add_argument("--arch", default="resnet18", help="net: the network")
    ap.add_argument("--shape", nargs=3, type=int, default=[3, 32, 32], help="net: one input's shape")
    ap.add_argument("--batch", type=int, default=20, help="net: samples per SGD step")
    ap.add_argument("--eval", type=int, default=500, help="net: test images in the forward")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)  # one variant's process: its JSON spec
    args = ap.parse_args()
    args.measure = args.measure or ("stream" if args.device == "cuda" else "jobs")
    for k, v in DEFAULTS[args.measure].items():
        setattr(args, k, v if getattr(args, k) is None else getattr(args, k))
    for k in ("benchmark", "methods"):  # a comma list too (the GPU benchmark's form)
        setattr(args, k, getattr(args, k) and [x for a in getattr(args, k) for x in a.split(",") if x])
    return args


def src_dir(path: Path) -> Path:
    """A code tree's ``src/`` (its ``conf/`` beside it), given the checkout or the folder itself."""
    return path.resolve() / "src" if (path / "src" / "clsuite").is_dir() else path.resolve()


def fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def write(out: Path | None, data: dict) -> None:
    if out:
        (out / "bench.json").write_text(json.dumps(data, indent=1))


def progress(r: dict) -> str:
    head = f"{r['label']} round {r['round']} " + " ".join(
        str(r[k]) for k in ("benchmark", "method", "reading", "arch") if k in r
    )
    if "error" in r:
        return f"{head}: {r['error']}"
    key = next(k for k in ("train_s", "ms_per_batch", "train_ms", "save_s") if k in r)
    value = r[key][0] if key == "train_ms" else r[key]  # net: (CPU, wall)
    return f"{head}: {key} {value:.2f}" + (f", peak {r['peak_mb']:.0f} MiB" if "peak_mb" in r else "")


def table(head: str, body: list[str], rule: str) -> str:
    """A Markdown table of ``" | "``-joined cells; ``rule``: the alignment row, ``|---|---:|``..."""
    return "\n".join([f"| {head} |", rule, *(f"| {line} |" for line in body)])


def median(xs) -> float:
    xs = list(xs)
    return statistics.median(xs) if xs else float("nan")


def side_by_side(ok: list[dict], labels: list[str], metrics: dict) -> tuple[str, dict]:
    """Per (benchmark, method): each variant's median of each metric, and its ratio to the first variant's."""
    head, body, summary = ["benchmark", "method"], [], {}
    for name in metrics:
        head += [f"{name} {v}" for v in labels] + [f"{name} {v} / {labels[0]}" for v in labels[1:]]
    for b, m in dict.fromkeys((r["benchmark"], r["method"]) for r in ok):
        cells, summary[f"{b} {m}"] = [b, m], {}
        for name, f in metrics.items():
            med = [median(f(r) for r in ok if (r["benchmark"], r["method"], r["label"]) == (b, m, v)) for v in labels]
            cells += [f"{x:.2f}" for x in med] + [f"{x / med[0]:.2f}" for x in med[1:]]
            summary[f"{b} {m}"][name] = dict(zip(labels, med, strict=True))
        body.append(" | ".join(cells))
    return table(" | ".join(head), body, "|---|---|" + "---:|" * (len(head) - 2)), summary


def report_jobs(args, ok, rows, labels, load):
    what = (
        f"{', '.join(args.benchmark)}, reading=mir_code, 1 thread, {args.repeats} rounds (seeds 0-{args.repeats - 1})"
    )
    load_line = f"load average at the end {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}"
    if len(labels) > 1:
        ms = {"ms/batch": lambda x: 1e3 * per_batch(x), "CPU s/job": lambda x: x["cpu_s"]}
        compared, summary = side_by_side(ok, labels, ms)
        return (
            f"""`make bench-numerics`: {what}, one process per variant and round, variants alternating; {load_line}

{compared}

ms/batch: wall time in training per incoming batch (moves with other load); CPU s/job: the job's own CPU time, \
start to results file (robust to other load on the machine).""",
            summary,
        )
    er = [r for r in ok if r["method"] == "er"]
    if not er:
        return "error: no ER job finished: nothing to compare with", {}
    every, later = set(range(args.repeats)), set(range(1, args.repeats)) or {0}
    body, summary = [], {}
    for b, m in dict.fromkeys((r["benchmark"], r["method"]) for r in ok):

        def med(f, rounds=every, of=(b, m)):
            return median(f(x) for x in ok if (x["benchmark"], x["method"]) == of and x["round"] in rounds)

        t, w = med(per_batch), med(lambda x: x["work_per_batch"])
        er_t, er_w = (
            median(f(x) for x in er if x["benchmark"] == b) for f in (per_batch, lambda x: x["work_per_batch"])
        )
        wall, outside = med(lambda x: x["wall_s"], later), med(lambda x: x["wall_s"] - x["train_s"], later)
        share = med(lambda x: (x["wall_s"] - x["train_s"]) / x["wall_s"], later)
        evals = med(lambda x: x["eval_s"], later)
        body.append(f"{m} | {1e3 * t:.2f} | {t / er_t:.2f} | {w / er_w:.2f} | {wall:.2f} | {outside:.2f} | "
                    f"{100 * share:.0f} | {evals:.2f}")  # fmt: skip
        summary[m] = {"ms_per_batch": 1e3 * t, "time_vs_er": t / er_t, "work_vs_er": w / er_w, "outside_share": share}
    head = "method | ms/batch | time vs ER | work vs ER | job wall s | outside training s | outside % | of which evaluations s"
    first = er[0]
    return (
        f"""`make bench`: {what}, {len(args.methods)} methods in one process; checkout {args.root}\
{f"; overrides {' '.join(args.set)}" if args.set else ""}
CPU: {first["cpu"]} ({os.cpu_count()} cores), torch {first["torch"]}, python {platform.python_version()}; \
{load_line}; imports {first["imports_s"]:.2f} s
ER's first job (round 0: reads the data files): {first["wall_s"] - first["train_s"]:.2f} s outside training of \
{first["wall_s"]:.2f} s; medians below over rounds {sorted(later)}

{table(head, body, "|---|" + "---:|" * 7)}""",
        summary,
    )


def per_batch(x: dict) -> float:
    return x["train_s"] / x["steps"]


def report_stream(args, ok, rows, labels, load):
    lines = [f"device: {ok[0]['device']}, torch {ok[0]['torch']}; M = 100, |B_t| = |R| = 20, lr 0.1"] if ok else []
    body = []
    for r in rows:
        if "error" in r:
            body.append(f"{r['benchmark']} | {r['method']} | {r['label']} | ERROR {r['error'][:80]}" + " | -" * 5)
            continue
        full = r["projected_full_run_s"]
        full = f"{full / 60:.1f} min" if full >= 60 else f"{full:.0f} s"
        busy = f"{r['gpu_busy_ms_per_batch'] / r['ms_per_batch']:.0%}" if "gpu_busy_ms_per_batch" in r else "-"
        syncs = f"{r['syncs_per_batch']:.1f}" if "syncs_per_batch" in r else "-"
        body.append(f"{r['benchmark']} | {r['method']} | {r['label']} | {r['ms_per_batch']:.2f} | {r['eval_s']:.2f} | "
                    f"{r.get('peak_mb', 0):.0f} | {syncs} | {busy} | {full}")  # fmt: skip
    head = "benchmark | method | variant | ms/batch | eval s | peak MiB | syncs/b | GPU busy | full run"
    lines.append(table(head, body, "|---|---|---|" + "---:|" * 6))
    summary = {}
    if len(labels) > 1:
        compared, summary = side_by_side(ok, labels, {"ms/batch": lambda x: x["ms_per_batch"]})
        lines += ["\nms / incoming batch, median over rounds:", compared]
    syncs = [r for r in ok if r.get("sync_sites") and r["benchmark"] in ("split_cifar10", "split_cifar100")]
    if syncs:  # split-MNIST repeats them
        lines.append("\nhost-device synchronisations per incoming batch (set_sync_debug_mode), by source line:")
        for r in syncs:
            lines.append(f"  {r['benchmark']} {r['method']} {r['label']}: {r['syncs_per_batch']:.1f}/batch")
            lines += [f"    {v:6.1f}  {k}" for k, v in list(r["sync_sites"].items())[:10]]
    return "\n".join(lines), summary


def report_net(args, ok, rows, labels, load):
    body = []
    for r in ok:
        (tc, tw), (ec, ew) = r["train_ms"], r["eval_ms"]
        kernels = ", ".join(f"{a} {b}" for a, b in r["kernels"].items() if a != "mode")
        load = " / ".join(f"{v:.1f}" for v in r["load"])
        tree = f" ({r['version']})" if len({x["version"] for x in ok}) > 1 else ""  # several code trees
        body.append(f"{r['numerics']}{tree} | {tc:.0f} ({tw:.0f}) | {ec:.2f} ({ew:.2f}) | {kernels} | {load}")
    head = "numerics | train step: CPU ms (wall ms) | evaluation per image: CPU ms (wall ms) | kernels | load average"
    return (
        f"""{args.arch} {tuple(args.shape)}: SGD step on {args.batch} samples (mean of {args.batches}), forward per \
test image (mean over {args.eval}); one torch thread

{table(head, body, "|---|---:|---:|---|---|")}""",
        {},
    )


def report_checkpoint(args, ok, rows, labels, load):
    body = [f"{r['benchmark']} | {r['reading']} | {r['M']} | {r['params']:,} | {r['bytes'] / 1e6:.1f} | "
            f"{r['save_s']:.3f} | {r['load_s']:.3f}" for r in ok]  # fmt: skip
    head = "benchmark | reading | M (slots) | parameters | MB per checkpoint | s per write | s to resume"
    return (
        f"""
## Checkpoint cost ({", ".join(args.methods)}, memory=100, CPU, median of {args.repeats} writes)

{table(head, body, "|---|---|" + "---:|" * 5)}""",
        {},
    )


REPORTS = {"jobs": report_jobs, "stream": report_stream, "net": report_net, "checkpoint": report_checkpoint}


# ----------------------------------------------------------------------------- child (one variant's process)
def child(args) -> int:
    """Imports the variant's clsuite, pins its kernels, prints one ``ROW {json}`` line per measured cell."""
    v = args.variant
    src = Path(v["src"])
    sys.path[:0] = [str(src)]
    t_import = time.perf_counter()
    import hydra
    import torch

    import clsuite.experiment  # noqa: F401

    t_import = time.perf_counter() - t_import
    assert Path(sys.modules["clsuite"].__file__).resolve().is_relative_to(src), "imported the wrong clsuite"
    if v["numerics"]:  # before the first torch computation of this process
        from clsuite.numerics import apply

        apply(v["numerics"])
    cells, one = SETUPS[args.measure](args)
    with hydra.initialize_config_dir(config_dir=str(src.parent / "conf"), version_base="1.3"):
        for r, cell in itertools.product(args.rounds, cells):
            row = {"version": v["version"], "numerics": v["numerics"], "label": v["label"], "round": r, **cell}
            row |= {"torch": torch.__version__, "imports_s": t_import}
            try:
                row.update(one(r, **cell))
            except Exception as e:  # one failing cell must not lose the others
                row["error"] = f"{type(e).__name__}: {e}"
                traceback.print_exc()
            print("ROW " + json.dumps(row), flush=True)
    return 0


def compose(overrides: list[str]):
    from hydra import compose

    return compose("config", overrides=["logger=none", "trainer.progress_bar=false", *overrides])


# ----------------------------------------------------------------------------- jobs
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
    import torch

    functorch, plain = torch._C._functorch, x
    while functorch.is_batchedtensor(plain) or functorch.is_gradtrackingtensor(plain):
        plain = functorch.get_unwrapped(plain)
    if plain is x:
        return x.shape[0] if x.dim() else 1
    return plain.numel() // max(1, math.prod(x.shape[1:]))


def setup_jobs(args):
    import torch

    import clsuite.callbacks as callbacks
    from clsuite.experiment import cpu_model, run_experiment
    from clsuite.models.nets import MLP, ReducedResNet18

    torch.set_num_threads(1)
    counter = WorkCounter((MLP, ReducedResNet18))
    torch.nn.modules.module.register_module_forward_hook(counter.hook)  # this process measures only
    evaluate, eval_s = callbacks.evaluate, [0.0]  # this job's time in evaluations

    def uncounted_evaluate(*a, **kw):  # evaluations are not training work
        counter.on = False
        t0 = time.perf_counter()
        try:
            return evaluate(*a, **kw)
        finally:
            counter.on = True
            eval_s[0] += time.perf_counter() - t0

    callbacks.evaluate = uncounted_evaluate
    tmp = tempfile.TemporaryDirectory()  # removed when this process ends

    def one(r, benchmark, method):
        counter.fwd = counter.fwd_bwd = 0
        eval_s[0] = 0.0
        t0, c0 = time.perf_counter(), time.process_time()
        overrides = [f"method={method}", f"benchmark={benchmark}", "reading=mir_code", f"seed={r}", "trainer.threads=1"]
        c = compose([*overrides, f"trainer.numerics={args.variant['numerics']}", *args.set])
        res = run_experiment(c, Path(tmp.name) / f"{benchmark}_{method}_{r}")
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        steps = sum(res["steps_per_task"])
        return {
            "wall_s": wall,
            "cpu_s": cpu,  # this process's CPU time for the whole job: robust to other load
            "train_s": res["train_time_s"],
            "eval_s": eval_s[0],
            "steps": steps,
            "acc": res["metrics"]["acc"],
            "work_per_batch": counter.units() / steps,
            "cpu": cpu_model(),
        }

    return [{"benchmark": b, "method": m} for b in args.benchmark for m in args.methods], one


# ----------------------------------------------------------------------------- stream (CPU or GPU)
def random_arrays(num_classes, shape, train_per_class, test_per_class, seed=0):
    import numpy as np

    rng = np.random.default_rng(seed)
    ytr = np.repeat(np.arange(num_classes), train_per_class).astype(np.int64)
    yte = np.repeat(np.arange(num_classes), test_per_class).astype(np.int64)
    xtr = rng.integers(0, 256, size=(len(ytr), *shape), dtype=np.uint8)
    xte = rng.integers(0, 256, size=(len(yte), *shape), dtype=np.uint8)
    return xtr, ytr, xte, yte


class SyncLog:
    """Collects the warnings of ``set_sync_debug_mode("warn")`` by the first frame of our code."""

    def __init__(self):
        self.where: dict[str, int] = {}

    def showwarning(self, message, category, filename, lineno, file=None, line=None):
        if "synchroniz" not in str(message):
            return self._orig(message, category, filename, lineno, file, line)
        frames = traceback.extract_stack()[:-1]
        ours = [f for f in frames if "/clsuite/" in f.filename]
        f = ours[-1] if ours else frames[-1]
        tail = f.filename.split("/clsuite/")[-1] if "/clsuite/" in f.filename else f.filename
        lib = "" if frames[-1] is f else f"  <- {Path(frames[-1].filename).name}:{frames[-1].lineno}"
        key = f"{tail}:{f.lineno} {(f.line or '').strip()[:70]}{lib}"
        self.where[key] = self.where.get(key, 0) + 1

    def __enter__(self):
        import warnings

        import torch

        self._orig = warnings.showwarning
        self._filters = warnings.filters[:]
        warnings.simplefilter("always")
        warnings.showwarning = self.showwarning
        torch.cuda.set_sync_debug_mode("warn")
        return self

    def __exit__(self, *exc):
        import warnings

        import torch

        torch.cuda.set_sync_debug_mode("default")
        warnings.showwarning = self._orig
        warnings.filters[:] = self._filters


def setup_stream(args):
    import torch

    import clsuite.data.datamodule as datamodule_mod
    import clsuite.data.sources as sources_mod

    os.environ.setdefault("DATA_DIR", str(ROOT / ".data"))
    cuda = args.device == "cuda"
    if cuda and not torch.cuda.is_available():
        raise SystemExit("error: no CUDA device (use --device cpu)")
    if args.cudnn_benchmark:
        torch.backends.cudnn.benchmark = True
    cache: dict = {}
    real_load = sources_mod.load_source

    def load_source(source, root, download, verify, **kw):
        if source in RANDOM:
            if source not in cache:
                spec = dict(RANDOM[source])
                if not cuda:  # CPU smoke test: evaluating 10,000 CIFAR images on a CPU takes minutes
                    spec["test_per_class"] = max(1, spec["test_per_class"] // 50)
                cache[source] = random_arrays(**spec)
            return cache[source]
        return real_load(source, root, download, verify, **kw)

    sources_mod.load_source = load_source
    if hasattr(datamodule_mod, "load_source"):
        datamodule_mod.load_source = load_source
    args.profile &= args.profile_only in (None, args.variant["version"])
    return [{"benchmark": b, "method": m} for b in args.benchmark for m in args.methods], (
        lambda r, benchmark, method: time_one(args, benchmark, method, cuda)
    )


def time_one(args, bname, method, cuda) -> dict:
    import lightning as L
    import torch

    from clsuite.callbacks import MemoryUpdate, evaluate
    from clsuite.experiment import build

    def sync():
        if cuda:
            torch.cuda.synchronize()

    cfg = compose(
        [
            f"benchmark={bname}",
            f"method={method}",
            "trainer=" + ("cpu" if not cuda else "gpu"),
            "memory=100",
            "seed=0",
            *args.set,
        ],
    )
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    dm, learner, device = build(cfg)
    build_s = time.perf_counter() - t0
    static = torch.cuda.memory_allocated() if cuda else 0
    trainer = L.Trainer(  # the suite's make_trainer settings, plus a batch limit per fit
        accelerator="gpu" if cuda else "cpu",
        devices=[device.index or 0] if cuda else 1,
        max_epochs=0,
        logger=False,
        callbacks=[MemoryUpdate()],
        enable_checkpointing=False,
        enable_model_summary=False,
        enable_progress_bar=False,
        num_sanity_val_steps=0,
        limit_val_batches=0,
        deterministic=False,
        precision="32-true",
    )
    if args.cudnn_benchmark:
        torch.backends.cudnn.benchmark = True  # Lightning set it to False
    epoch = 0
    per_task = math.ceil(len(dm.split(0, "train")[1]) / dm.batch_size)

    def fit(task, n):
        nonlocal epoch
        dm.set_task(task)
        learner.start_task(task)
        trainer.fit_loop.max_epochs = epoch + 1
        trainer.limit_train_batches = n
        trainer.fit(learner, datamodule=dm)
        epoch += 1

    fit(0, min(args.warmup, per_task))  # warm-up: CUDA start, cuDNN choice, the memory fills
    left, task = args.batches or STREAM_BATCHES.get(bname, 150), 1
    sync()
    t0 = time.perf_counter()
    steps0 = learner.train_steps
    while left > 0 and task < dm.n_tasks:
        n = min(per_task, left)
        fit(task, n)
        left -= n
        task += 1
    sync()
    train_s = time.perf_counter() - t0
    timed = learner.train_steps - steps0
    peak_train = torch.cuda.max_memory_allocated() if cuda else 0
    t0 = time.perf_counter()
    try:  # every task's test split, as one row of R
        accs, _ = evaluate(learner, dm, "test")
        sync()
        eval_s, eval_error = time.perf_counter() - t0, None
    except Exception as e:  # keep the training timings
        accs, eval_s, eval_error = [float("nan")] * dm.n_tasks, float("nan"), f"{type(e).__name__}: {e}"
        traceback.print_exc()
    out = {
        "device": torch.cuda.get_device_name() if cuda else "cpu",
        "torch": torch.__version__,
        "iters_per_batch": learner.iters_per_batch,
        "memory_capacity": learner.memory.capacity,
        "memory_size": len(learner.memory),
        "batches_timed": timed,
        "ms_per_batch": 1e3 * train_s / max(timed, 1),
        "eval_s": eval_s,
        "build_s": build_s,
        "static_mb": static / 2**20,
        "peak_mb": peak_train / 2**20,
        "n_tasks": dm.n_tasks,
        "batches_per_task": per_task,
        "acc_after": float(sum(accs[:task]) / task),
    }
    if eval_error:
        out["eval_error"] = eval_error
    total_batches = dm.n_tasks * per_task
    out["projected_full_run_s"] = total_batches * out["ms_per_batch"] / 1e3 + (dm.n_tasks + 1) * eval_s
    next_task = min(task, dm.n_tasks - 1)
    try:  # the diagnostics must not lose the timings above
        diagnose(args, out, cuda, sync, fit, next_task)
    except Exception as e:
        out["diagnostics_error"] = f"{type(e).__name__}: {e}"
        traceback.print_exc()
    if cuda:
        out["peak_mb_all"] = torch.cuda.max_memory_allocated() / 2**20
    return out


def diagnose(args, out, cuda, sync, fit, next_task) -> None:
    if cuda and args.sync_debug:
        with SyncLog() as log:
            fit(next_task, args.debug_batches)
        out["syncs_per_batch"] = sum(log.where.values()) / args.debug_batches
        out["sync_sites"] = {k: v / args.debug_batches for k, v in sorted(log.where.items(), key=lambda kv: -kv[1])}
    if cuda and args.profile:
        from torch.profiler import ProfilerActivity, profile

        sync()
        t0 = time.perf_counter()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            fit(next_task, args.debug_batches)
            sync()
        wall = time.perf_counter() - t0
        kernel_us, launches = 0.0, 0
        for e in prof.events():  # kernels, copies and memsets: the GPU's own time line
            if str(e.device_type).endswith("CUDA"):
                kernel_us += e.time_range.elapsed_us()
                launches += 1
        out["profile_wall_ms_per_batch"] = 1e3 * wall / args.debug_batches
        out["gpu_busy_ms_per_batch"] = kernel_us / 1e3 / args.debug_batches
        out["kernels_per_batch"] = launches / args.debug_batches


# ----------------------------------------------------------------------------- net
def setup_net(args):
    import torch

    from clsuite import numerics
    from clsuite.models.nets import build_model

    torch.set_num_threads(1)

    def one(r, arch):
        torch.manual_seed(0)
        shape = tuple(args.shape)
        net = build_model(arch, shape, 10)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        x, y = torch.rand(args.batch, *shape), torch.randint(0, 10, (args.batch,))

        def step():
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(x), y).backward()
            opt.step()

        for _ in range(args.warmup):
            step()
        t, c = time.perf_counter(), time.process_time()
        for _ in range(args.batches):
            step()
        train = ((time.process_time() - c) / args.batches, (time.perf_counter() - t) / args.batches)
        net.eval()
        xe = torch.rand(args.eval, *shape)
        t, c = time.perf_counter(), time.process_time()
        with torch.no_grad():
            net(xe)
        ev = ((time.process_time() - c) / args.eval, (time.perf_counter() - t) / args.eval)
        return {
            "train_ms": [1e3 * v for v in train],
            "eval_ms": [1e3 * v for v in ev],
            "kernels": numerics.in_effect(args.variant["numerics"]),
            "load": os.getloadavg(),
        }

    return [{"arch": args.arch}], one


# ----------------------------------------------------------------------------- checkpoint
def setup_checkpoint(args):
    import torch

    from clsuite import checkpoint as ck
    from clsuite.callbacks import AccuracyMatrix, DivergenceGuard, MemoryUpdate
    from clsuite.experiment import build, make_trainer
    from clsuite.identity import identity

    def built(c):
        """A run after task 0, its memory full: (learner, trainer, callbacks)."""
        dm, learner, device = build(c)
        callbacks = [DivergenceGuard(), MemoryUpdate(), AccuracyMatrix(dm), ck.TaskCheckpoint("bench")]
        trainer = make_trainer(c, device, callbacks, None)
        dm.set_task(0)
        learner.start_task(0)
        trainer.fit_loop.max_epochs = 1
        trainer.fit(learner, datamodule=dm)
        mem = learner.memory
        g = torch.Generator().manual_seed(0)
        n = mem.capacity - mem.size
        mem.append(
            torch.rand(n, *mem.x.shape[1:], generator=g),
            torch.randint(mem.num_classes, (n,), generator=g),
            torch.zeros(n, dtype=torch.long),
        )
        return learner, trainer, callbacks

    def one(r, benchmark, method, reading):
        c = compose(["trainer=cpu", f"method={method}", f"reading={reading}", *CHECKPOINT_CASES[benchmark]])
        identity(c, "cpu")  # (the data files' digests: outside the timings)
        learner, trainer, _ = built(c)
        with tempfile.TemporaryDirectory() as d:
            store = ck.CheckpointStore(d, "bench")
            times = []
            for i in range(args.repeats):
                t = time.perf_counter()
                path = store.save(trainer, i + 1)
                times.append(time.perf_counter() - t)
            size = path.stat().st_size
            fresh, trainer2, callbacks2 = built(c)
            t = time.perf_counter()
            found = store.latest(map_location="cpu")
            ck.restore(found[1], trainer2, fresh, callbacks2)
            load_s = time.perf_counter() - t
        params = sum(p.numel() for p in learner.net.parameters())
        return {
            "save_s": statistics.median(times),
            "load_s": load_s,
            "bytes": size,
            "M": learner.memory.capacity,
            "params": params,
        }

    cells = [
        {"benchmark": b, "method": m, "reading": rd}
        for b in CHECKPOINT_CASES
        for m in args.methods
        for rd in ("mir_code", "paper_text")
    ]
    return cells, one


SETUPS = {"jobs": setup_jobs, "stream": setup_stream, "net": setup_net, "checkpoint": setup_checkpoint}

if __name__ == "__main__":
    sys.exit(main())
