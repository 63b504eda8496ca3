"""Time per incoming batch of ER, MIR and AdaER on a GPU (or the CPU), with the memory peak.

For each benchmark and method the suite's own ``build()`` makes the data module, network,
memory and method from the composed config (M = 100 total, |B_t| = |R| = 20, lr 0.1), and
one Lightning Trainer (the suite's settings) runs the stream with the ``MemoryUpdate``
callback, as ``run_experiment`` does, but for a bounded number of incoming batches:

1. warm-up: the first ``--warmup`` batches of task 0 (CUDA start, the memory fills);
2. timed: the next ``--batches`` batches from task 1 on (default: 150 on split-MNIST and
   split-CIFAR10, 50 on split-CIFAR100) (one fit per task, so the per-fit
   overhead is counted), between two ``torch.cuda.synchronize()``; ms / incoming batch;
3. one evaluation of every task's test split (timed the same way);
4. with ``--sync-debug``: a few more batches under ``torch.cuda.set_sync_debug_mode("warn")``,
   listing each host-device synchronisation (and so each blocking copy) by the source line
   that caused it;
5. with ``--profile``: a few more batches under ``torch.profiler``: the GPU's busy time per
   batch (kernels, copies), shown as a share of the timed ms / batch (low: the step is bound
   by the CPU side, launching kernels, not by the GPU). In one call (H200, torch 2.11) the
   profiled process's later timings were 20-50% above an unprofiled one's and the gap was
   gone without the profiler: ``--profile-only NAME`` profiles one code tree; compare
   timings of runs without ``--profile``.

Projected full run = ms / batch x incoming batches of the whole stream + (tasks + 1)
evaluations (b and one row of R per task). The per-batch cost is taken as constant: the
memory is full from the warm-up on; E-BRS places accepted samples one by one and fewer are
accepted late in the stream (M / N), so AdaER's late batches are a little cheaper.

Data: split-MNIST reads the real files (``--data-dir``, md5-checked); CIFAR-10 and CIFAR-100
are random uint8 images of the real shape and sizes (50,000 train / 10,000 test 3x32x32;
10,000 and 1,000 training samples per task) through the same split code: the step cost does
not depend on the pixel values.

Several code trees can be timed side by side in one call (``--src name=path/to/src``, each
in its own process, e.g. the committed code against the working tree). Results: a table on
stdout, ``gpu_bench.json`` and ``gpu_bench.log`` in ``--out``.

    python scripts/gpu_bench.py --cpu --batches 5 --warmup 6         # smoke test on the CPU
    python scripts/gpu_bench.py --src old=.gpu_old/src --src new=src --sync-debug --profile
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# name -> (Hydra benchmark, random data of the real shape and sizes, or None: the real files)
BENCHMARKS = {
    "mnist": ("split_mnist", None),
    "cifar10": ("split_cifar10", dict(num_classes=10, shape=(3, 32, 32), train_per_class=5000, test_per_class=1000)),
    "cifar100": ("split_cifar100", dict(num_classes=100, shape=(3, 32, 32), train_per_class=500, test_per_class=100)),
}
METHODS = ("er", "mir", "adaer")
DEFAULT_BATCHES = {"mnist": 150, "cifar10": 150, "cifar100": 50}  # timed incoming batches (--batches)


# ----------------------------------------------------------------------------- worker (one code tree)
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


def worker(args) -> list[dict]:
    src = Path(args.src[-1]).resolve()
    conf = Path(args.conf).resolve() if args.conf else src.parent / "conf"
    sys.path[:0] = [str(src)]
    os.environ.setdefault("DATA_DIR", args.data_dir)

    import lightning as L
    import torch
    from hydra import compose, initialize_config_dir

    import clsuite.data.datamodule as datamodule_mod
    import clsuite.data.sources as sources_mod
    from clsuite.callbacks import MemoryUpdate, evaluate
    from clsuite.experiment import build

    assert Path(sys.modules["clsuite"].__file__).resolve().is_relative_to(src), "imported the wrong clsuite"
    cuda = not args.cpu
    if cuda and not torch.cuda.is_available():
        raise SystemExit("error: no CUDA device (use --cpu)")
    if args.cudnn_benchmark:
        torch.backends.cudnn.benchmark = True

    def sync():
        if cuda:
            torch.cuda.synchronize()

    cache: dict = {}
    real_load = sources_mod.load_source

    def load_source(source, root, download, verify, **kw):
        if source in ("cifar10", "cifar100"):
            if source not in cache:
                spec = dict(BENCHMARKS[source][1])
                if not cuda:  # CPU smoke test: evaluating 10,000 CIFAR images on a CPU takes minutes
                    spec["test_per_class"] = max(1, spec["test_per_class"] // 50)
                cache[source] = random_arrays(**spec)
            return cache[source]
        return real_load(source, root, download, verify, **kw)

    sources_mod.load_source = load_source
    if hasattr(datamodule_mod, "load_source"):
        datamodule_mod.load_source = load_source

    rows = []
    for bname in args.benchmarks:
        for method in args.methods:
            row = {"version": args.name, "benchmark": bname, "method": method}
            try:
                row.update(
                    time_one(
                        args,
                        bname,
                        method,
                        cuda,
                        sync,
                        L,
                        torch,
                        compose,
                        initialize_config_dir,
                        conf,
                        build,
                        MemoryUpdate,
                        evaluate,
                    )
                )
            except Exception as e:  # one failing cell must not lose the others
                row["error"] = f"{type(e).__name__}: {e}"
                traceback.print_exc()
            rows.append(row)
            print("ROW " + json.dumps(row), flush=True)
    return rows


def time_one(
    args, bname, method, cuda, sync, L, torch, compose, initialize_config_dir, conf, build, MemoryUpdate, evaluate
) -> dict:
    overrides = [
        f"benchmark={BENCHMARKS[bname][0]}",
        f"method={method}",
        "logger=none",
        "trainer.progress_bar=false",
        "trainer=" + ("cpu" if not cuda else "gpu"),
        "memory=100",
        "seed=0",
        *args.override,
    ]
    with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
        cfg = compose("config", overrides=overrides)
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
    left, task = args.batches or DEFAULT_BATCHES[bname], 1
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


# ----------------------------------------------------------------------------- driver
def table(rows) -> str:
    head = (
        f"{'benchmark':9s} {'method':6s} {'version':8s} {'ms/batch':>9s} {'eval s':>7s} {'peak MiB':>9s} "
        f"{'syncs/b':>8s} {'GPU busy':>9s} {'full run':>9s}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        if "error" in r:
            lines.append(f"{r['benchmark']:9s} {r['method']:6s} {r['version']:8s} ERROR {r['error'][:80]}")
            continue
        busy = f"{r['gpu_busy_ms_per_batch'] / r['ms_per_batch']:.0%}" if "gpu_busy_ms_per_batch" in r else "-"
        syncs = f"{r['syncs_per_batch']:.1f}" if "syncs_per_batch" in r else "-"
        full = r["projected_full_run_s"]
        full_s = f"{full / 60:.1f} min" if full >= 60 else f"{full:.0f} s"
        lines.append(
            f"{r['benchmark']:9s} {r['method']:6s} {r['version']:8s} {r['ms_per_batch']:9.2f} {r['eval_s']:7.2f} "
            f"{r.get('peak_mb', 0):9.0f} {syncs:>8s} {busy:>9s} {full_s:>9s}"
        )
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cpu", action="store_true", help="run on the CPU (smoke test)")
    ap.add_argument("--batches", type=int, default=0, help=f"timed incoming batches (default {DEFAULT_BATCHES})")
    ap.add_argument("--warmup", type=int, default=20, help="warm-up batches (task 0)")
    ap.add_argument("--benchmarks", default="mnist,cifar10,cifar100")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--src", action="append", default=None, help="name=path of a code tree's src (repeatable)")
    ap.add_argument("--sync-debug", action="store_true", help="list the host-device syncs per batch")
    ap.add_argument("--profile", action="store_true", help="GPU busy time per batch (torch.profiler)")
    ap.add_argument("--profile-only", default=None, help="profile only the code tree of this name")
    ap.add_argument("--debug-batches", type=int, default=8)
    ap.add_argument("--cudnn-benchmark", action="store_true", help="torch.backends.cudnn.benchmark = True")
    ap.add_argument("--data-dir", default=os.environ.get("DATA_DIR", str(ROOT / ".data")))
    ap.add_argument("--out", default=os.environ.get("OUT", "gpu_bench_out"))
    ap.add_argument("--override", action="append", default=[], help="extra Hydra override (repeatable)")
    ap.add_argument("--repeats", type=int, default=1, help="alternate the code trees this many times")
    # worker mode (internal)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--name", default="new", help=argparse.SUPPRESS)
    ap.add_argument("--conf", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.benchmarks = [b for b in args.benchmarks.split(",") if b]
    args.methods = [m for m in args.methods.split(",") if m]
    for b in args.benchmarks:
        if b not in BENCHMARKS:
            print(f"error: unknown benchmark {b!r}; valid: {', '.join(BENCHMARKS)}", file=sys.stderr)
            sys.exit(2)
    if args.worker:
        worker(args)
        return

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    trees = args.src or [f"new={ROOT / 'src'}"]
    log = open(out / "gpu_bench.log", "a")  # noqa: SIM115
    rows = []
    for rep in range(args.repeats):
        for tree in trees:
            name, path = tree.split("=", 1)
            cmd = [sys.executable, __file__, "--worker", "--name", name, "--src", path]
            for flag in ("cpu", "sync_debug", "profile", "cudnn_benchmark"):
                if getattr(args, flag) and not (flag == "profile" and args.profile_only not in (None, name)):
                    cmd.append("--" + flag.replace("_", "-"))
            cmd += [
                "--batches",
                str(args.batches),
                "--warmup",
                str(args.warmup),
                "--debug-batches",
                str(args.debug_batches),
                "--benchmarks",
                ",".join(args.benchmarks),
                "--methods",
                ",".join(args.methods),
                "--data-dir",
                args.data_dir,
            ]
            for o in args.override:
                cmd += ["--override", o]
            t0 = time.perf_counter()
            print(f"== {name} ({path}), repeat {rep}", flush=True)
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for line in proc.stdout:
                log.write(line)
                log.flush()
                if line.startswith("ROW "):
                    r = json.loads(line[4:])
                    r["repeat"] = rep
                    rows.append(r)
                    (out / "gpu_bench.json").write_text(json.dumps(rows, indent=1))
                    msg = r.get("error") or f"{r['ms_per_batch']:.2f} ms/batch, peak {r.get('peak_mb', 0):.0f} MiB"
                    print(f"  {r['benchmark']:9s} {r['method']:6s} {msg}", flush=True)
                elif "Error" in line or "error:" in line or "Traceback" in line:
                    print("  " + line.rstrip(), flush=True)
            proc.wait()
            print(f"   ({name}: {time.perf_counter() - t0:.0f} s, exit {proc.returncode})", flush=True)
    (out / "gpu_bench.json").write_text(json.dumps(rows, indent=1))
    log.close()
    report = summary(rows)
    (out / "gpu_bench_summary.txt").write_text(report + "\n")
    print("\n" + report)


def summary(rows) -> str:
    """The table, the old-vs-new ratios, and the sync sites (split-CIFAR10 only: the others repeat them)."""
    ok = [r for r in rows if "error" not in r]
    lines = []
    if ok:
        lines.append(f"device: {ok[0]['device']}, torch {ok[0]['torch']}; M = 100, |B_t| = |R| = 20, lr 0.1")
    lines.append(table(rows))
    versions = list(dict.fromkeys(r["version"] for r in ok))
    if len(versions) > 1:
        lines.append(f"\nms / incoming batch, median over repeats: {' vs '.join(versions)}")
        cells = dict.fromkeys((r["benchmark"], r["method"]) for r in ok)
        for b, m in cells:
            med = []
            for v in versions:
                ts = sorted(r["ms_per_batch"] for r in ok if (r["benchmark"], r["method"], r["version"]) == (b, m, v))
                med.append(statistics.median(ts) if ts else float("nan"))
            i, j = (versions.index("old"), versions.index("new")) if {"old", "new"} <= set(versions) else (0, -1)
            ratio = med[i] / med[j] if med[j] else float("nan")
            lines.append(
                f"  {b:9s} {m:6s} "
                + "  ".join(f"{t:8.2f}" for t in med)
                + f"   {versions[i]}/{versions[j]} = {ratio:.2f}x"
            )
    syncs = [r for r in ok if r.get("sync_sites") and r["benchmark"] in ("cifar10", "cifar100")]
    if syncs:
        lines.append("\nhost-device synchronisations per incoming batch (set_sync_debug_mode), by source line:")
        for r in syncs:
            lines.append(f"  {r['benchmark']} {r['method']} {r['version']}: {r['syncs_per_batch']:.1f}/batch")
            lines += [f"    {v:6.1f}  {k}" for k, v in list(r["sync_sites"].items())[:10]]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
