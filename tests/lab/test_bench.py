"""scripts/bench.py (`make bench`, `make bench-numerics`, the GPU benchmark): bad input is one error
line before any process starts; the tables' medians and ratios on given rows, each with the record of
the machine; the stream's CIFAR data as a valid config; (slow) a small run of the jobs and stream
measurements on the CPU."""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "scripts" / "bench.py"


def bench_module():
    spec = importlib.util.spec_from_file_location("bench_script", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(*args, cwd=ROOT, env=None):
    return subprocess.run([sys.executable, str(BENCH), *args], capture_output=True, text=True, cwd=cwd, env=env)


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--methods", "er", "nope"], "error: unknown method(s) nope; valid: "),
        (["--measure", "stream", "--benchmarks", "split_mnist,mnist"], "error: unknown benchmark(s) mnist; valid: "),
        (["--device", "cuda", "--measure", "jobs"], "error: --device cuda measures the stream only"),
        (["--device", "cuda", "--benchmark", "synthetic"], "error: --device cuda, but torch "),  # no GPU seen
    ],
)
def test_bad_input_is_one_error_line_and_exit_2(args, line):
    p = run(*args, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert (p.returncode, p.stdout) == (2, "")
    assert p.stderr.startswith(line) and len(p.stderr.splitlines()) == 1, p.stderr


MACHINE = {"device": "cpu", "cpu": "X", "cores": 2, "threads": 1, "torch": "T", "python": "P", "load": [4.0, 5.0, 6.0]}
MACHINE_LINE = (
    "device: cpu; CPU: X (2 cores), 1 torch thread(s), torch T, python P; load average at the end 1.00 / 2.00 / 3.00"
)


def job(method, r, train_s, work, wall_s, label="new"):
    return {"benchmark": "split_mnist", "method": method, "round": r, "label": label, "train_s": train_s, "steps": 10,
            "work_per_batch": work, "wall_s": wall_s, "eval_s": 0.5, "cpu_s": 2 * train_s, "imports_s": 1.0,
            **MACHINE}  # fmt: skip


def test_jobs_table_medians_against_er_and_rounds_after_the_first():
    b = bench_module()
    args = argparse.Namespace(benchmark=["split_mnist"], repeats=3, methods=["er", "gss"], root=ROOT, set=[])
    rows = [job("er", r, 1.0 + r, 60, 4.0 + r) for r in range(3)] + [job("gss", r, 3.0, 120, 6.0) for r in range(3)]
    text, summary = b.report_jobs(args, rows, rows, ["new"], (1.0, 2.0, 3.0))
    # ER: 0.1, 0.2, 0.3 s per batch (median 0.2); job wall over rounds 1, 2: 5 and 6 s, of which 3 s outside
    assert "| er | 200.00 | 1.00 | 1.00 | 5.50 | 3.00 | 55 | 0.50 |" in text
    assert "| gss | 300.00 | 1.50 | 2.00 | 6.00 | 3.00 | 50 | 0.50 |" in text
    assert "ER's first job (round 0: reads the data files): 3.00 s outside training of 4.00 s" in text
    assert f"{MACHINE_LINE}; imports 1.00 s" in text
    assert summary["gss"] == pytest.approx(
        {"ms_per_batch": 300, "time_vs_er": 1.5, "work_vs_er": 2, "outside_share": 0.5}
    )


def test_variants_side_by_side_with_ratios_to_the_first():
    b = bench_module()
    args = argparse.Namespace(benchmark=["split_mnist"], repeats=2)
    rows = [job("er", r, 1.0, 60, 4.0, "native") for r in range(2)]
    rows += [job("er", 0, 2.0, 60, 4.0, "portable"), job("er", 1, 4.0, 60, 4.0, "portable")]
    text, summary = b.report_jobs(args, rows, rows, ["native", "portable"], (1.0, 2.0, 3.0))
    assert "| benchmark | method | ms/batch native | ms/batch portable | ms/batch portable / native | CPU s/job" in text
    assert "| split_mnist | er | 100.00 | 300.00 | 3.00 | 2.00 | 6.00 | 3.00 |" in text
    assert summary["split_mnist er"]["CPU s/job"] == {"native": 2.0, "portable": 6.0}
    assert "variants alternating\n" + MACHINE_LINE + "\n\n| benchmark | method |" in text


def test_stream_table_keeps_a_failed_cell():
    b = bench_module()
    ok = {"benchmark": "split_cifar10", "method": "er", "label": "new", **MACHINE, "device": "H",
          "ms_per_batch": 10.0, "cpu_ms_per_batch": 4.0, "eval_s": 0.05, "peak_mb": 160.0, "projected_full_run_s": 90.0}  # fmt: skip
    failed = {"benchmark": "split_cifar10", "method": "mir", "label": "new", "error": "RuntimeError: boom"}
    args = argparse.Namespace(set=[], reading="paper_text")
    text, _ = b.report_stream(args, [ok], [ok, failed], ["new"], (1.0, 2.0, 3.0))
    assert "| split_cifar10 | er | new | 10.00 | 4.00 | 0.05 | 160 | 1.5 min |" in text
    assert "| split_cifar10 | mir | new | ERROR RuntimeError: boom | - | - | - | - |" in text
    header = "\nreading=paper_text, memory=100, seed 0\n"
    assert text.startswith(MACHINE_LINE.replace("device: cpu", "device: H") + header)


def test_stream_per_fit_table_against_er_at_the_same_task():
    """Each fit's CPU ms per batch without its task end, over ER's at the same task; Joint's one fit has none."""
    b = bench_module()

    def row(method, tasks):
        fits = [{"task": k, "batches": 2, "ms_per_batch": 2 * ms, "cpu_ms_per_batch": ms, "end_s": 1.0,
                 "end_cpu_s": end} for k, ms, end in tasks]  # fmt: skip
        return {"benchmark": "split_cifar10_jpeg", "method": method, "label": "new", **MACHINE, "ms_per_batch": 1.0,
                "cpu_ms_per_batch": 1.0, "eval_s": float("nan"), "projected_full_run_s": 1.0, "tasks": fits}  # fmt: skip

    rows = [row("er", [(0, 50.0, 0.0), (1, 100.0, 0.0)]), row("gem", [(0, 50.0, 0.0), (1, 400.0, 2.5)])]
    rows.append(row("joint", [("joint", 40.0, 0.0)]))
    args = argparse.Namespace(set=[], reading="mir_code", batches=2, warmup=2, no_eval=True)
    text, _ = b.report_stream(args, rows, rows, ["new"], (1.0, 2.0, 3.0))
    assert "timed: 2 incoming batches after 2 of task 0; no evaluation (--no-eval)" in text
    assert "| split_cifar10_jpeg | gem | new | 1 | 2 | 800.0 | 400.0 | 4.00 | 2.50 |" in text
    assert "| split_cifar10_jpeg | er | new | 0 | 2 | 100.0 | 50.0 | 1.00 | 0.00 |" in text
    assert "| split_cifar10_jpeg | joint | new | joint | 2 | 80.0 | 40.0 | nan | 0.00 |" in text


def test_checkpoint_table_on_given_rows():
    b = bench_module()
    args = argparse.Namespace(methods=["adaer"], repeats=5)
    ck = {"benchmark": "split-MNIST (MLP)", "reading": "mir_code", "M": 1000, "params": 478410, "bytes": 5.1e6,
          "save_s": 0.0561, "load_s": 0.0244, **MACHINE}  # fmt: skip
    text, _ = b.report_checkpoint(args, [ck], [ck], ["new"], (1.0, 2.0, 3.0))
    assert "## Checkpoint cost (adaer, memory=100, CPU, median of 5 writes)\n" + MACHINE_LINE in text
    assert "| split-MNIST (MLP) | mir_code | 1000 | 478,410 | 5.1 | 0.056 | 0.024 |" in text
    assert "|---|---|---:|---:|---:|---:|---:|" in text


def test_the_stream_runs_the_documented_setting_and_cifar_as_the_suites_synthetic_source():
    import hydra

    from clsuite.config.check import validate

    b = bench_module()
    for name, cuda in itertools.product(b.STREAM_BATCHES, (False, True)):
        with hydra.initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
            cfg = b.compose(b.stream_overrides(name, "adaer", cuda, ["seed=3"]))
            cifar_run = b.compose(b.stream_overrides(name, "adaer", cuda, ["seed=3"], "mir_code"))  # `make bench`'s
        # paper_text (docs/notes/GPU.md): M = 100 in total, |B_t| = |R| = 20, lr 0.1; mir_code: 10 and M per class
        assert (cfg.memory, cfg.memory_per_class, cfg.batch_size, cfg.replay_size, cfg.lr) == (100, False, 20, 20, 0.1)
        got = (cifar_run.memory, cifar_run.memory_per_class, cifar_run.batch_size, cifar_run.replay_size)
        assert got == (100, True, 10, 10)
        assert (cfg.trainer.accelerator, cfg.seed, cfg.benchmark.name) == ("gpu" if cuda else "cpu", 3, name)
        if name in b.SYNTHETIC:
            classes, train, test = b.SYNTHETIC[name]
            test = test if cuda else test // 50  # a CPU evaluates fewer test images
            if not cuda:  # (validate refuses trainer=gpu without a GPU, split_mnist without its files)
                validate(cfg)  # the sizes fit the source
            assert (cfg.benchmark.source, cfg.benchmark.backbone) == ("synthetic", "resnet18")
            assert dict(cfg.benchmark.synthetic) == {"num_classes": classes, "shape": [3, 32, 32],
                                                     "train_per_class": train, "test_per_class": test, "seed": 0}  # fmt: skip


@pytest.mark.slow
def test_each_measurement_runs_on_the_cpu(tmp_path):
    """The jobs and stream measurements, a few batches each, through their child processes."""
    p = run("--methods", "er", "--repeats", "1", "--benchmark", "synthetic", "--out", str(tmp_path / "jobs"))
    assert p.returncode == 0, p.stderr[-3000:]
    assert "| er | " in p.stdout and "| 1.00 | 1.00 |" in p.stdout
    saved = json.loads((tmp_path / "jobs" / "bench.json").read_text())
    assert saved["complete"] and saved["rows"][0]["steps"] > 0 and saved["summary"]["er"]["time_vs_er"] == 1.0
    p = run("--measure", "stream", "--benchmark", "synthetic", "--methods", "er", "--batches", "2", "--warmup", "1",
            "--out", str(tmp_path / "jobs"))  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    # one --out for both (make bench BENCH_ARGS="--out DIR"): the stream's files beside the jobs', not over them
    assert json.loads((tmp_path / "jobs" / "bench.json").read_text()) == saved
    assert json.loads((tmp_path / "jobs" / "bench-stream.json").read_text())["complete"]
    assert {p.name for p in (tmp_path / "jobs").iterdir()} >= {"bench-stream.md", "bench-stream.log", "bench.md"}
    assert "device: cpu" in p.stdout and "| synthetic | er | new |" in p.stdout
