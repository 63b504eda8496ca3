"""The network's own cost, per ``trainer.numerics`` mode: one SGD step and one test forward, nothing else.

    python scripts/bench_net.py                       # reduced ResNet-18 on 3x32x32, native then portable
    python scripts/bench_net.py --modes native --arch mlp --shape 1 28 28

Each mode runs in its own process (a process pins its kernels once: ``clsuite.numerics.apply``):
``--warmup`` steps, then the mean over ``--steps`` SGD steps on a batch of ``--batch`` samples (20 =
|B_t| + |R| under ``mir_code``) and over one no-grad forward of ``--eval`` images, one torch thread;
CPU time (``time.process_time``: what the process itself used) and wall time, since on a shared
machine the two differ by the machine's load. docs/PERFORMANCE.md ("split-CIFAR10 on the CPU").
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def measure(args) -> dict:
    sys.path[:0] = [str(ROOT / "src")]
    from clsuite import numerics

    numerics.apply(args.modes[0])
    import torch

    from clsuite.models.nets import build_model

    torch.set_num_threads(1)
    torch.manual_seed(0)
    shape = tuple(args.shape)
    net = build_model(args.arch, shape, 10)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    x, y = torch.rand(args.batch, *shape), torch.randint(0, 10, (args.batch,))

    def step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(x), y).backward()
        opt.step()

    for _ in range(args.warmup):
        step()
    t, c = time.perf_counter(), time.process_time()
    for _ in range(args.steps):
        step()
    train = ((time.process_time() - c) / args.steps, (time.perf_counter() - t) / args.steps)
    net.eval()
    xe = torch.rand(args.eval, *shape)
    t, c = time.perf_counter(), time.process_time()
    with torch.no_grad():
        net(xe)
    ev = ((time.process_time() - c) / args.eval, (time.perf_counter() - t) / args.eval)
    return {"mode": args.modes[0], "train_ms": [1e3 * v for v in train], "eval_ms": [1e3 * v for v in ev],
            "kernels": numerics.in_effect(args.modes[0]), "load": os.getloadavg()}  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--modes", nargs="+", default=["native", "portable"])
    ap.add_argument("--arch", default="resnet18")
    ap.add_argument("--shape", nargs=3, type=int, default=[3, 32, 32])
    ap.add_argument("--batch", type=int, default=20)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--eval", type=int, default=500)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(measure(args)))
        return 0
    print(f"{args.arch} {tuple(args.shape)}: SGD step on {args.batch} samples (mean of {args.steps}), "
          f"forward per test image (mean over {args.eval}); one torch thread\n")  # fmt: skip
    print(
        "| numerics | train step: CPU ms (wall ms) | evaluation per image: CPU ms (wall ms) | kernels | load average |"
    )
    print("|---|---:|---:|---|---|")
    for mode in args.modes:
        argv = [a for a in sys.argv[1:] if a != "--modes" and a not in args.modes]
        p = subprocess.run(
            [sys.executable, __file__, *argv, "--modes", mode, "--child"], capture_output=True, text=True
        )
        if p.returncode != 0:
            print(p.stderr[-2000:], file=sys.stderr)
            return 1
        r = json.loads(p.stdout.strip().splitlines()[-1])
        (tc, tw), (ec, ew) = r["train_ms"], r["eval_ms"]
        k = ", ".join(f"{a} {b}" for a, b in r["kernels"].items() if a != "mode")
        load = " / ".join(f"{v:.1f}" for v in r["load"])
        print(f"| {mode} | {tc:.0f} ({tw:.0f}) | {ec:.2f} ({ew:.2f}) | {k} | {load} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
