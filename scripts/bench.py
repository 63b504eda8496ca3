"""`make bench`, `make bench-numerics` and the GPU benchmark: each method's cost, side by side in one run.

The measures, the variants' processes and rounds, ``--out``: docs/notes/PERFORMANCE.md, "Measuring: `make bench`";
``--measure stream``: docs/notes/GPU.md; ``--measure checkpoint``: docs/notes/CHECKPOINTS.md, "Cost".
"""

from __future__ import annotations

import argparse
import contextlib
import functools
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
STREAM_BATCHES = {"split_mnist": 150, "split_cifar10": 150, "split_cifar100": 50}  # its benchmarks, timed batches
SYNTHETIC = {"split_cifar10": (10, 5000, 1000), "split_cifar100": (100, 500, 100)}  # stream: classes, images per class
DEFAULTS = {  # per measure, for the options left out
    "jobs": dict(repeats=3, benchmark=["split_mnist"], numerics=["native"]),
    "stream": dict(
        repeats=1,
        benchmark=list(STREAM_BATCHES),
        methods=["er", "mir", "adaer"],
        warmup=20,
        numerics=[None],
        reading="paper_text",
    ),
    "checkpoint": dict(repeats=5, methods=["adaer"], numerics=[None]),
}


def synthetic(classes: int, train: int, test: int) -> list[str]:
    """Overrides: the suite's synthetic source (Gaussian clusters as uint8 images) of CIFAR's shape and these sizes."""
    spec = f"num_classes:{classes},shape:[3,32,32],train_per_class:{train},test_per_class:{test},seed:0"
    return ["benchmark.source=synthetic", f"+benchmark.synthetic={{{spec}}}"]


CHECKPOINT_CASES = {  # name: overrides
    "split-MNIST (MLP)": ["benchmark=split_mnist", "benchmark.train_per_class=20"],
    "split-CIFAR100 (reduced ResNet-18, synthetic)": [
        "benchmark=split_cifar100",
        *synthetic(100, 4, 2),
        "benchmark.train_per_class=4",
    ],
}


# ----------------------------------------------------------------------------- driver (no clsuite import)
def main() -> int:
    args = parse()
    if args.child:
        return child(argparse.Namespace(**json.loads(args.child)))
    sys.path.insert(0, str(ROOT / "src"))  # the driver's helpers: this checkout's (a child imports its variant's)
    from clsuite.core.errors import fail
    from clsuite.run.io import write_json_atomic

    if args.device == "cuda" and args.measure != "stream":
        return fail(f"--device cuda measures the stream only (--measure stream), not --measure {args.measure}")
    if args.device == "cuda":
        import torch  # (only here: the driver imports no torch on the CPU)

        if not torch.cuda.is_available():
            return fail(f"--device cuda, but torch {torch.__version__} sees no CUDA device; valid here: --device cpu")
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
    out = Path(args.out) if args.out else None
    if out:
        out.mkdir(parents=True, exist_ok=True)

    def save(data: dict) -> None:  # bench.json: each row as it comes, then the summary
        if out:
            write_json_atomic(out / f"{args.stem}.json", data)

    rows, failed = [], False
    rounds = range(args.repeats) if args.measure in ("jobs", "stream") else [0]
    together = len(variants) == 1 and args.measure == "jobs"  # one process: round 0 pays its one-time costs
    with open(out / f"{args.stem}.log" if out else os.devnull, "a") as log:
        for group in [list(rounds)] if together else [[r] for r in rounds]:
            for v in variants if group[0] % 2 == 0 else variants[::-1]:  # alternate which variant goes first
                failed |= run_child(args, v, group, rows, save, log) != 0
    ok = [r for r in rows if "error" not in r]
    load = os.getloadavg()
    text, summary = REPORTS[args.measure](args, ok, rows, [v["label"] for v in variants], load)
    print(text)
    if out:
        (out / f"{args.stem}.md").write_text(text + "\n")
    save({"complete": True, "rows": rows, "summary": summary, "load": load})
    return 1 if failed or len(ok) < len(rows) else 0


def run_child(args, v: dict, rounds: list[int], rows: list[dict], save, log) -> int:
    """One variant's process for these rounds: its rows into ``rows`` (and bench.json), its output into the log."""
    print(f"== {v['label']} ({v['src']}), round {rounds[0] if len(rounds) == 1 else 'all'}", file=sys.stderr)
    spec = json.dumps({**vars(args), "variant": v, "rounds": rounds, "child": None}, default=str)
    with Clock() as t:
        proc = subprocess.Popen(
            [sys.executable, __file__, "--child", spec], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        for line in proc.stdout:
            log.write(line)
            log.flush()
            if line.startswith("ROW "):
                rows.append(json.loads(line[4:]))
                save({"complete": False, "rows": rows})
                print(f"  {progress(rows[-1])}", file=sys.stderr, flush=True)
            elif not args.out or "Error" in line or "error:" in line or "Traceback" in line:
                print(line.rstrip(), file=sys.stderr, flush=True)
        proc.wait()
    print(f"   ({v['label']}: {t.wall:.0f} s, exit {proc.returncode})", file=sys.stderr)
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
    ap.add_argument("--out", default=None, help="write bench[-<measure>][-numerics].json, .log and .md here")
    ap.add_argument("--batches", type=int, default=None, help=f"stream: timed batches ({STREAM_BATCHES})")
    ap.add_argument("--warmup", type=int, default=None, help="stream: batches of task 0 (20)")
    ap.add_argument("--reading", default=None, help="stream: the reading (paper_text: docs/notes/GPU.md's setting)")
    ap.add_argument(
        "--no-eval", action="store_true", help="stream: skip the final evaluation (its cost: any one method's)"
    )
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)  # one variant's process: its JSON spec
    args = ap.parse_args()
    args.measure = args.measure or ("stream" if args.device == "cuda" else "jobs")
    for k, v in DEFAULTS[args.measure].items():
        setattr(args, k, v if getattr(args, k) is None else getattr(args, k))
    for k in ("benchmark", "methods"):  # a comma list too (the GPU benchmark's form)
        setattr(args, k, getattr(args, k) and [x for a in getattr(args, k) for x in a.split(",") if x])
    # the files of --out, one set per line of `make bench` and `make bench-numerics`: none overwrites another's
    args.stem = "bench" + f"-{args.measure}" * (args.measure != "jobs") + "-numerics" * (len(args.numerics) > 1)
    return args


def src_dir(path: Path) -> Path:
    """A code tree's ``src/`` (its ``conf/`` beside it), given the checkout or the folder itself."""
    return path.resolve() / "src" if (path / "src" / "clsuite").is_dir() else path.resolve()


def progress(r: dict) -> str:
    head = f"{r['label']} round {r['round']} " + " ".join(
        str(r[k]) for k in ("benchmark", "method", "reading") if k in r
    )
    if "error" in r:
        return f"{head}: {r['error']}"
    key = next(k for k in ("train_s", "ms_per_batch", "save_s") if k in r)
    return f"{head}: {key} {r[key]:.2f}" + (f", peak {r['peak_mb']:.0f} MiB" if "peak_mb" in r else "")


class Clock:
    """Wall and CPU seconds of a ``with`` block (``.wall``, ``.cpu``); ``sync`` (a CUDA synchronize) at both ends."""

    def __init__(self, sync=None):
        self.sync = sync or (lambda: None)

    def __enter__(self):
        self.sync()
        self.start = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc):
        self.sync()
        self.wall, self.cpu = time.perf_counter() - self.start[0], time.process_time() - self.start[1]


# ----------------------------------------------------------------------------- the tables (one printer)
def table(head: str, body: list[list[str]], align: str) -> str:
    """The one printer: a Markdown table of ``" | "``-joined heads and rows of cells; ``align``: a letter per
    column, l (text) or r (numbers)."""
    rule = "|" + "".join("---:|" if a == "r" else "---|" for a in align)
    return "\n".join([f"| {head} |", rule, *(f"| {' | '.join(cells)} |" for cells in body)])


def machine(r: dict, load) -> str:
    """The record of what moves numbers (``record_machine``; the kernels: per variant), as one line."""
    return (
        f"device: {r['device']}; CPU: {r['cpu']} ({r['cores']} cores), {r['threads']} torch thread(s), "
        f"torch {r['torch']}, python {r['python']}; load average at the end " + " / ".join(f"{x:.2f}" for x in load)
    )


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
        body.append(cells)
    return table(" | ".join(head), body, "ll" + "r" * (len(head) - 2)), summary


def per_batch(x: dict) -> float:
    return x["train_s"] / x["steps"]


def report_jobs(args, ok, rows, labels, load):
    what = (
        f"{', '.join(args.benchmark)}, reading=mir_code, 1 thread, {args.repeats} rounds (seeds 0-{args.repeats - 1})"
    )
    if len(labels) > 1:
        ms = {"ms/batch": lambda x: 1e3 * per_batch(x), "CPU s/job": lambda x: x["cpu_s"]}
        compared, summary = side_by_side(ok, labels, ms)
        return (
            f"""`make bench-numerics`: {what}, one process per variant and round, variants alternating
{machine(ok[0], load)}

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
        er_t, er_w = med(per_batch, of=(b, "er")), med(lambda x: x["work_per_batch"], of=(b, "er"))
        wall, outside = med(lambda x: x["wall_s"], later), med(lambda x: x["wall_s"] - x["train_s"], later)
        share = med(lambda x: (x["wall_s"] - x["train_s"]) / x["wall_s"], later)
        cells = [f"{x:.2f}" for x in (1e3 * t, t / er_t, w / er_w, wall, outside)]
        body.append([m, *cells, f"{100 * share:.0f}", f"{med(lambda x: x['eval_s'], later):.2f}"])
        summary[m] = {"ms_per_batch": 1e3 * t, "time_vs_er": t / er_t, "work_vs_er": w / er_w, "outside_share": share}
    head = "method | ms/batch | time vs ER | work vs ER | job wall s | outside training s | outside % | of which evaluations s"
    first, overrides = er[0], f"; overrides {' '.join(args.set)}" if args.set else ""
    return (
        f"""`make bench`: {what}, {len(args.methods)} methods in one process; checkout {args.root}{overrides}
{machine(first, load)}; imports {first["imports_s"]:.2f} s
ER's first job (round 0: reads the data files): {first["wall_s"] - first["train_s"]:.2f} s outside training of \
{first["wall_s"]:.2f} s; medians below over rounds {sorted(later)}

{table(head, body, "l" + "r" * 7)}""",
        summary,
    )


def report_stream(args, ok, rows, labels, load):
    overrides = f"; overrides {' '.join(args.set)}" if args.set else ""
    lines = [machine(ok[0], load), f"reading={args.reading}, memory=100, seed 0{overrides}"] if ok else []
    if ok and ok[0].get("tasks"):  # (rows of an older bench have no fits)
        skipped = "; no evaluation (--no-eval)" * bool(getattr(args, "no_eval", False))
        lines.append(f"timed: {args.batches} incoming batches after {args.warmup} of task 0{skipped}")
    body = []
    for r in rows:
        if "error" in r:
            body.append([r["benchmark"], r["method"], r["label"], f"ERROR {r['error'][:80]}", *["-"] * 4])
            continue
        full = r["projected_full_run_s"]
        body.append([r["benchmark"], r["method"], r["label"], f"{r['ms_per_batch']:.2f}",
                     f"{r['cpu_ms_per_batch']:.2f}", f"{r['eval_s']:.2f}", f"{r.get('peak_mb', 0):.0f}",
                     f"{full / 60:.1f} min" if full >= 60 else f"{full:.0f} s"])  # fmt: skip
    head = "benchmark | method | variant | ms/batch | CPU ms/batch | eval s | peak MiB | full run"
    lines.append(table(head, body, "lll" + "r" * 5))
    if any(r.get("tasks") for r in ok):
        lines += ["\nPer fit (task; Joint: the union), the task-end work (learner.on_train_end) apart; CPU ms per "
                  "incoming batch without it, and its ratio to ER's at the same task (first ER row of the run):", per_task(ok)]  # fmt: skip
    summary = {}
    if len(labels) > 1:
        per_batch = {"ms/batch": lambda x: x["ms_per_batch"], "CPU ms/batch": lambda x: x["cpu_ms_per_batch"]}
        compared, summary = side_by_side(ok, labels, per_batch)
        lines += ["\nms / incoming batch (wall, and this process's CPU time), median over rounds:", compared]
    return "\n".join(lines), summary


def per_task(ok: list[dict]) -> str:
    """The per-fit table of ``--measure stream``: each fit's CPU ms per batch, its ratio to ER's, its task end."""
    er = next((r for r in ok if r["method"] == "er" and r.get("tasks")), None)
    er_at = {x["task"]: x["cpu_ms_per_batch"] for x in er["tasks"]} if er else {}
    body = []
    for r in ok:
        for x in r.get("tasks", []):
            ratio = x["cpu_ms_per_batch"] / er_at[x["task"]] if x["task"] in er_at else float("nan")
            body.append([r["benchmark"], r["method"], r["label"], str(x["task"]), str(x["batches"]),
                         f"{x['ms_per_batch']:.1f}", f"{x['cpu_ms_per_batch']:.1f}", f"{ratio:.2f}",
                         f"{x['end_cpu_s']:.2f}"])  # fmt: skip
    head = "benchmark | method | variant | task | batches | ms/batch | CPU ms/batch | CPU vs ER | task end CPU s"
    return table(head, body, "llllr" + "r" * 4)


def report_checkpoint(args, ok, rows, labels, load):
    body = [[r["benchmark"], r["reading"], str(r["M"]), f"{r['params']:,}", f"{r['bytes'] / 1e6:.1f}",
             f"{r['save_s']:.3f}", f"{r['load_s']:.3f}"] for r in ok]  # fmt: skip
    head = "benchmark | reading | M (slots) | parameters | MB per checkpoint | s per write | s to resume"
    return (
        f"""
## Checkpoint cost ({", ".join(args.methods)}, memory=100, CPU, median of {args.repeats} writes)
{machine(ok[0], load) if ok else ""}

{table(head, body, "ll" + "r" * 5)}""",
        {},
    )


REPORTS = {"jobs": report_jobs, "stream": report_stream, "checkpoint": report_checkpoint}


# ----------------------------------------------------------------------------- child (one variant's process)
def child(args) -> int:
    """Imports the variant's clsuite, pins its kernels, prints one ``ROW {json}`` line per measured cell."""
    v = args.variant
    src = Path(v["src"])
    sys.path[:0] = [str(src)]
    with Clock() as imports:
        import hydra

        import clsuite.run.experiment  # noqa: F401

    assert Path(sys.modules["clsuite"].__file__).resolve().is_relative_to(src), "imported the wrong clsuite"
    if v["numerics"]:  # before the first torch computation of this process
        from clsuite.config.numerics import apply

        apply(v["numerics"])
    with contextlib.suppress(ImportError):  # (an older code tree (--src) has none)
        from clsuite.run.runtime import keep_freed_memory

        keep_freed_memory()  # as a run does (clsuite.run.record): large CPU tensors reuse freed memory
    if args.measure == "checkpoint":
        cells = itertools.product(CHECKPOINT_CASES, args.methods, ("mir_code", "paper_text"))
        cells = [{"benchmark": b, "method": m, "reading": rd} for b, m, rd in cells]
    else:
        cells = [{"benchmark": b, "method": m} for b in args.benchmark for m in args.methods]
    one = SETUPS[args.measure](args)
    with hydra.initialize_config_dir(config_dir=str(src.parent / "conf"), version_base="1.3"):
        for r, cell in itertools.product(args.rounds, cells):
            row = {"version": v["version"], "numerics": v["numerics"], "label": v["label"], "round": r, **cell}
            row["imports_s"] = imports.wall
            try:
                row.update(one(r, **cell))
                row.update(record_machine(args))
            except Exception as e:  # one failing cell must not lose the others
                row["error"] = f"{type(e).__name__}: {e}"
                traceback.print_exc()
            print("ROW " + json.dumps(row), flush=True)
    return 0


def record_machine(args) -> dict:
    """What moves a timing besides the code: the device, CPU, threads, torch, kernels (a --numerics mode), load."""
    import torch

    try:
        from clsuite.run.record import cpu_model
    except ImportError:  # an older code tree (--src)
        cpu_model = platform.processor
    record = {
        "device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "load": os.getloadavg(),
    }
    if args.variant["numerics"]:
        from clsuite.config.numerics import in_effect

        record["kernels"] = in_effect(args.variant["numerics"])
    return record


def compose(overrides: list[str]):
    from hydra import compose

    return compose("config", overrides=["logger=none", "trainer.progress_bar=false", *overrides])


class Run:
    """A run as ``run_experiment`` builds it: data, learner (``build_s``: seconds in ``build()``), the
    suite's Trainer with ``callbacks(dm)``; ``fit(task, n)``: one fit of ``task``, its first ``n`` batches."""

    def __init__(self, c, callbacks):
        from clsuite.core.train import build
        from clsuite.run.experiment import make_trainer

        with Clock() as t:
            self.dm, self.learner, device = build(c)
        self.build_s, self.epoch, self.callbacks = t.wall, 0, callbacks(self.dm)
        self.trainer = make_trainer(c, device, self.callbacks, None)

    def fit(self, task: int | str, n: int | None = None) -> None:
        self.dm.set_task(task)
        self.learner.start_task(self.dm.n_tasks - 1 if task == "joint" else task)
        self.epoch += 1
        self.trainer.fit_loop.max_epochs = self.epoch
        self.trainer.limit_train_batches = 1.0 if n is None else n  # None: every batch
        self.trainer.fit(self.learner, datamodule=self.dm)


# ----------------------------------------------------------------------------- jobs
def samples(x) -> int:
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

    import clsuite.core.callbacks as callbacks
    from clsuite.core.models.nets import MLP, ReducedResNet18
    from clsuite.run.experiment import run_experiment

    torch.set_num_threads(1)
    count = {"on": True, "work": 0, "eval_s": 0.0}  # forward-equivalents through the network, evaluations' time

    def hook(module, inputs, output):  # a forward whose output requires grad: forward + backward = 3 forwards
        if count["on"] and isinstance(module, (MLP, ReducedResNet18)):
            out = output[0] if isinstance(output, tuple) else output
            count["work"] += samples(inputs[0]) * (3 if getattr(out, "requires_grad", False) else 1)

    torch.nn.modules.module.register_module_forward_hook(hook)  # this process measures only
    evaluate = callbacks.evaluate

    def uncounted_evaluate(*a, **kw):  # evaluations are not training work
        count["on"], t = False, Clock()
        try:
            with t:
                return evaluate(*a, **kw)
        finally:
            count["on"] = True
            count["eval_s"] += t.wall

    callbacks.evaluate = uncounted_evaluate
    tmp = tempfile.TemporaryDirectory()  # removed when this process ends

    def one(r, benchmark, method):
        count.update(work=0, eval_s=0.0)
        with Clock() as t:
            overrides = [f"method={method}", f"benchmark={benchmark}", "reading=mir_code", f"seed={r}"]
            c = compose([*overrides, "trainer.threads=1", f"trainer.numerics={args.variant['numerics']}", *args.set])
            res = run_experiment(c, Path(tmp.name) / f"{benchmark}_{method}_{r}")
        steps = sum(res["steps_per_task"])
        return {
            "wall_s": t.wall,
            "cpu_s": t.cpu,  # this process's CPU time for the whole job: robust to other load
            "train_s": res["train_time_s"],
            "eval_s": count["eval_s"],
            "steps": steps,
            "acc": res["metrics"]["acc"],
            "work_per_batch": count["work"] / steps,
        }

    return one


# ----------------------------------------------------------------------------- stream (CPU or GPU)


def stream_overrides(bname: str, method: str, cuda: bool, extra: list[str], reading: str = "paper_text") -> list[str]:
    """The stream's run: the reading's (paper_text, docs/notes/GPU.md: M = 100 in total, |B_t| = |R| = 20, lr 0.1;
    mir_code: the CIFAR runs' M = 100 per class, |B_t| = |R| = 10), seed 0; CIFAR as synthetic images of its sizes;
    then ``extra`` (--set)."""
    overrides = [f"benchmark={bname}", f"method={method}", f"reading={reading}", "memory=100", "seed=0"]
    if bname in SYNTHETIC:  # CPU smoke test: evaluating 10,000 CIFAR images on a CPU takes minutes
        classes, train, test = SYNTHETIC[bname]
        overrides += synthetic(classes, train, test if cuda else max(1, test // 50))
    return [*overrides, "trainer=" + ("gpu" if cuda else "cpu"), *extra]


def time_one(args, r, benchmark, method) -> dict:
    import torch

    from clsuite.core.callbacks import MemoryUpdate, evaluate

    cuda = args.device == "cuda"
    sync = torch.cuda.synchronize if cuda else None  # (Clock: None syncs nothing)
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    c = compose(stream_overrides(benchmark, method, cuda, args.set, args.reading))
    run = Run(c, lambda dm: [MemoryUpdate()])
    dm, learner = run.dm, run.learner
    static = torch.cuda.memory_allocated() if cuda else 0
    joint = bool(c.method.get("joint", False))  # Joint: its own schedule, one fit over the union of the tasks
    per_task = math.ceil(len(dm.split(0, "train")[1]) / dm.batch_size)
    tasks, ends = [], []  # per fit: its batches and times; the task-end work (learner.on_train_end) timed apart
    task_end = learner.on_train_end

    def timed_task_end():
        with Clock(sync) as t:
            task_end()
        ends.append(t)

    learner.on_train_end = timed_task_end

    def fit(task, n):
        steps, done = learner.train_steps, len(ends)
        with Clock(sync) as t:
            run.fit(task, n)
        end_wall, end_cpu = (ends[done].wall, ends[done].cpu) if len(ends) > done else (0.0, 0.0)
        b = learner.train_steps - steps
        tasks.append({"task": task, "batches": b, "ms_per_batch": 1e3 * (t.wall - end_wall) / max(b, 1),
                      "cpu_ms_per_batch": 1e3 * (t.cpu - end_cpu) / max(b, 1), "end_s": end_wall,
                      "end_cpu_s": end_cpu})  # fmt: skip
        return t

    left = args.batches or STREAM_BATCHES.get(benchmark, 150)
    if joint:  # no warm-up fit: the union's stream is timed from its first batch
        per_task = math.ceil(sum(len(dm.split(k, "train")[1]) for k in range(dm.n_tasks)) / dm.batch_size)
        clocks = [fit("joint", min(per_task, args.warmup + left))]
    else:
        fit(0, min(args.warmup, per_task))  # warm-up: CUDA start, cuDNN choice, the memory fills
        fits = min(dm.n_tasks - 1, math.ceil(left / per_task))  # the timed ones, tasks 1.., the last one cut short
        clocks = [fit(task, min(per_task, left - (task - 1) * per_task)) for task in range(1, fits + 1)]
    task = dm.n_tasks if joint else len(tasks)  # the tasks trained
    wall, cpu = sum(t.wall for t in clocks), sum(t.cpu for t in clocks)  # the timed fits, with their task ends
    timed = sum(x["batches"] for x in (tasks if joint else tasks[1:]))
    peak_train = torch.cuda.max_memory_allocated() if cuda else 0
    nan = float("nan")
    accs, eval_s, eval_cpu_s, eval_error = [nan] * dm.n_tasks, nan, nan, None
    if not args.no_eval:
        try:  # every task's test split, as one row of R
            with Clock(sync) as t:
                accs = evaluate(learner, dm, "test")[0]
            eval_s, eval_cpu_s = t.wall, t.cpu
        except Exception as e:  # keep the training timings
            eval_error = f"{type(e).__name__}: {e}"
            traceback.print_exc()
    out = {
        "iters_per_batch": learner.iters_per_batch,
        "memory_capacity": learner.memory.capacity,
        "memory_size": len(learner.memory),
        "batches_timed": timed,
        "ms_per_batch": 1e3 * wall / max(timed, 1),
        "cpu_ms_per_batch": 1e3 * cpu / max(timed, 1),  # this process's: robust to other load on the machine
        "eval_s": eval_s,
        "eval_cpu_s": eval_cpu_s,  # this process's CPU time in the evaluation
        "build_s": run.build_s,
        "static_mb": static / 2**20,
        "peak_mb": peak_train / 2**20,
        "n_tasks": dm.n_tasks,
        "batches_per_task": per_task,
        "acc_after": float(sum(accs[:task]) / task),
        "joint": joint,
        "tasks": tasks,
    }
    if eval_error:
        out["eval_error"] = eval_error
    fits = 1 if joint else dm.n_tasks
    out["projected_full_run_s"] = fits * per_task * out["ms_per_batch"] / 1e3 + (dm.n_tasks + 1) * (
        0.0 if args.no_eval else eval_s
    )
    if cuda:
        out["peak_mb_all"] = torch.cuda.max_memory_allocated() / 2**20
    return out


# ----------------------------------------------------------------------------- checkpoint
def setup_checkpoint(args):
    import torch

    from clsuite.core.callbacks import AccuracyMatrix, DivergenceGuard, MemoryUpdate
    from clsuite.core.data.sources import bind
    from clsuite.run import checkpoint as ck
    from clsuite.run.identity import identity

    def built(c) -> Run:
        """A run after task 0, its memory full."""
        run = Run(c, lambda dm: [DivergenceGuard(), MemoryUpdate(), AccuracyMatrix(dm), ck.TaskCheckpoint("bench")])
        run.fit(0)
        mem, g = run.learner.memory, torch.Generator().manual_seed(0)
        n = mem.capacity - mem.size
        mem.append(
            torch.rand(n, *mem.x.shape[1:], generator=g),
            torch.randint(mem.num_classes, (n,), generator=g),
            torch.zeros(n, dtype=torch.long),
        )
        return run

    def one(r, benchmark, method, reading):
        c = compose(["trainer=cpu", f"method={method}", f"reading={reading}", *CHECKPOINT_CASES[benchmark]])
        identity(c, "cpu", bind(c.benchmark))  # (the data files' digests: outside the timings)
        run = built(c)
        with tempfile.TemporaryDirectory() as d:
            store, times = ck.CheckpointStore(d, "bench"), []
            for i in range(args.repeats):
                with Clock() as t:
                    run.trainer.save_checkpoint(path := store.path(i + 1))  # (Lightning's save, the digest)
                times.append(t.wall)
            size = path.stat().st_size
            fresh = built(c)
            with Clock() as t:  # a resume: the store's checks, then the fit's load of the file into the learner
                found = store.latest(map_location="cpu", fits=lambda c: ck.structure_problem(c, fresh.learner))
                fresh.learner.on_load_checkpoint(store.io.load_checkpoint(found[0], map_location="cpu"))
        return {
            "save_s": statistics.median(times),
            "load_s": t.wall,
            "bytes": size,
            "M": run.learner.memory.capacity,
            "params": sum(p.numel() for p in run.learner.net.parameters()),
        }

    return one


SETUPS = {"jobs": setup_jobs, "stream": lambda args: functools.partial(time_one, args), "checkpoint": setup_checkpoint}

if __name__ == "__main__":
    sys.exit(main())
