"""Paper sweeps (sweeps/*.yaml), launchers, resume and failure records, the GPU pool."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf, open_dict, read_write

from clsuite.analysis.paper_values import METHOD_ORDER
from clsuite.config.check import GROUPS, ConfigError, group_options
from clsuite.run import identity, io
from clsuite.sweep import gpus
from clsuite.sweep.gpus import gpu_slot
from clsuite.sweep.grid import expand_grid, validate_grid
from clsuite.sweep.index import reindex
from clsuite.sweep.job import Job, Sweep
from tests.conftest import CONF_DIR, FAST, make_cfg

ROOT = Path(__file__).resolve().parents[2]
SWEEPS_DIR = ROOT / "sweeps"
SWEEPS = sorted(p.stem for p in SWEEPS_DIR.glob("*.yaml") if not p.stem.startswith("_"))
# jobs per sweep at its own seeds (5; the open choices and the cell checks 10): benchmarks x methods x swept values x seeds
GRID_SIZES = {
    "table2": 3 * 14 * 5,
    "memory": 3 * 8 * 3 * 5,
    "first_task": 3 * 11 * 5,
    "cifar100": 7 * 5,
    "imbalance": 2 * 3 * 6 * 5,
    "tau": 3 * 5 * 5,
    "ablation": 3 * 5 * 3 * 5,
    "ablation_cifar100": 5 * 5,
    # the paper's open choices (make fig-choices): 10 seeds, split-MNIST and -FMNIST
    "choices_unscored": 2 * 2 * 3 * 10,
    "choices_victim": 2 * 2 * 2 * 10,
    "choices_R_t_from": 2 * 2 * 2 * 10,
    "choices_candidates": 2 * 2 * 2 * 10,
    "choices_replay_loss": 2 * 1 * 2 * 10,
    "choices_stored_logits": 2 * 2 * 2 * 10,
    "choices_logits_on_overwrite": 2 * 4 * 2 * 10,
    # Table II cells checked by measurement (make cells): 10 seeds, split-MNIST and -FMNIST
    "cells_joint": 2 * 1 * 4 * 10,
    "cells_agem_batch": 2 * 1 * 3 * 10,
    "cells_agem_draw": 2 * 1 * 2 * 10,
    "cells_agem_pool": 2 * 1 * 2 * 10,
    "cells_agem_layout": 2 * 1 * 3 * 10,
    "cells_agem_per_task": 2 * 1 * 2 * 10,
    # iCaRL's exemplar update on the CIFAR-10 JPEG copy
    "cells_icarl_update": 1 * 1 * 2 * 10,
    "cells_icarl_classifier": 1 * 1 * 2 * 10,
}


def compose_sweep(name: str, *overrides: str):
    """A sweep file composed as `python src/run.py --config-dir sweeps --config-name <name>` does."""
    with initialize_config_dir(config_dir=str(SWEEPS_DIR), version_base="1.3"):
        return compose(
            config_name=name, overrides=[f"hydra.searchpath=[file://{CONF_DIR}]", *overrides], return_hydra_config=True
        )


def grid(name: str, *command_line: str) -> list[dict]:
    """The jobs of `python src/run.py --config-dir sweeps --config-name <name> <command_line>`."""
    cfg = compose_sweep(name)
    with read_write(cfg), open_dict(cfg):
        cfg.hydra.overrides.task = list(command_line)
    return expand_grid(cfg)


def test_every_paper_experiment_has_a_sweep():
    assert set(SWEEPS) == set(GRID_SIZES)


@pytest.mark.parametrize("name", SWEEPS)
def test_sweep_composes_with_its_grid(name):
    cfg = compose_sweep(name)
    assert cfg.experiment == name  # results land in multirun/<name>/
    assert str(cfg.hydra.mode) == "RunMode.MULTIRUN"
    assert OmegaConf.to_container(cfg.hydra.sweep, resolve=False)["dir"] == "multirun/${experiment}"
    params = cfg.hydra.sweeper.params
    assert params.seed == ("range(0,10)" if name.startswith(("choices_", "cells_")) else "range(0,5)")
    jobs = expand_grid(cfg)
    assert len(jobs) == GRID_SIZES[name]
    assert len({j["dir"] for j in jobs}) == len(jobs)  # one folder per run
    methods = {o.split("=", 1)[1] for j in jobs for o in j["overrides"] if o.startswith("method=")}
    assert methods <= set(METHOD_ORDER)
    # the command line replaces the sweep's own axes: SEEDS=3 BENCHMARKS=split_mnist METHODS=er
    small = grid(name, "seed=range(0,3)", "benchmark=split_mnist", "method=er")
    others = [k for k in params if k not in ("seed", "benchmark", "method")]
    assert len(small) == 3 * math.prod(len(str(params[k]).split(",")) for k in others)


def test_sweep_fixed_keys():
    assert compose_sweep("table2").memory == 100
    assert compose_sweep("cifar100", "benchmark=split_cifar100").benchmark.iters_per_batch == 5
    # W&B: the experiment leads the tags and the group (one table cell: clsuite.run.wandb_run.describe)
    from clsuite.run.wandb_run import describe

    d = describe(OmegaConf.to_container(compose_sweep("tau", "logger=wandb", "tau=0.3"), resolve=False))
    assert d["tags"][0] == "tau" and d["group"].startswith("tau ") and "tau=0.3" in d["group"]


def tiny_job_overrides(name: str) -> list[str] | None:
    """The sweep's first job whose method exists, made tiny: synthetic data shaped like its benchmark."""
    for job in expand_grid(compose_sweep(name)):
        pairs = (o.split("=", 1) for o in job["overrides"])
        if any(k in GROUPS and v not in group_options(k) for k, v in pairs):  # (a method not written yet)
            continue
        out = []
        for o in job["overrides"]:
            key, _, value = o.partition("=")
            if key == "benchmark":
                out += ["benchmark=synthetic"]
                if "cifar" in value:
                    src = OmegaConf.load(Path(CONF_DIR) / "benchmark" / f"{value}.yaml")
                    out += [
                        "benchmark.synthetic.shape=[3,32,32]",
                        "benchmark.backbone=resnet18",
                        f"benchmark.iters_per_batch={src.iters_per_batch}",
                        "benchmark.synthetic.train_per_class=40",
                        "benchmark.train_per_class=20",
                        "benchmark.synthetic.test_per_class=10",
                    ]
            else:
                out.append(o)
        return out
    return None


@pytest.mark.slow
@pytest.mark.parametrize("name", SWEEPS)
def test_sweep_runs_one_tiny_job(name, tmp_path):
    from clsuite.run.experiment import run_experiment

    overrides = tiny_job_overrides(name)
    if overrides is None:
        pytest.skip(f"no method config of the {name} sweep exists yet")
    cfg = compose_sweep(name, *overrides, *FAST)
    with read_write(cfg), open_dict(cfg):
        del cfg["hydra"]
    res = run_experiment(cfg, tmp_path)
    assert res["config"]["experiment"] == name
    assert (tmp_path / "results.json").is_file()


# ----------------------------------------------------------------------------- launchers


@pytest.mark.parametrize(
    "launcher,target",
    [
        ("basic", "BasicLauncher"),
        ("joblib", "JoblibLauncher"),
        ("slurm", "SlurmLauncher"),
        ("submitit_local", "LocalLauncher"),
    ],
)
def test_launcher_group_sets_hydra_launcher(launcher, target):
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"launcher={launcher}"], return_hydra_config=True)
    assert cfg.hydra.launcher._target_.endswith(target)
    if launcher == "joblib":
        assert cfg.hydra.launcher.n_jobs >= 1  # one per GPU, else one per core
    if launcher == "slurm":
        assert cfg.hydra.launcher.gpus_per_node == 1


# ----------------------------------------------------------------------------- the grid check


def grid_of(*command_line: str):
    """(config, jobs) of ``python src/run.py -m <command_line>``; validate_grid runs inside a Hydra context."""
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="config", return_hydra_config=True)
    with read_write(cfg), open_dict(cfg):
        cfg.hydra.overrides.task = list(command_line)
    return cfg, expand_grid(cfg)


def test_a_bad_value_in_the_grid_is_refused():
    cfg, jobs = grid_of("benchmark=synthetic", "method=er", "lr=0.1,nan")
    with (
        initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"),
        pytest.raises(ConfigError, match="lr must be a finite number"),
    ):
        validate_grid(cfg, jobs)


def test_an_unknown_option_in_the_grid_names_its_job():
    """Each job of the grid is composed: Hydra's refusal of an unknown option names its job."""
    cfg, jobs = grid_of("benchmark=synthetic", "method=er,nope")
    with (
        initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"),
        pytest.raises(
            ConfigError, match=r"^unknown method 'nope'; valid choices: .*\(job benchmark=synthetic,method=nope\)$"
        ),
    ):
        validate_grid(cfg, jobs)


# ----------------------------------------------------------------------------- resume (in process)


def test_normalize_ignores_what_does_not_change_the_result():
    a = make_cfg("logger=csv", "trainer=cpu", "experiment=a")
    b = make_cfg("logger=none", "trainer=default", "trainer.progress_bar=true", "experiment=b", "data.root=/x")
    assert identity.config_hash(a) == identity.config_hash(make_cfg("reuse=false", "checkpoint_dir=/k"))
    assert identity.config_hash(a) == identity.config_hash(b)
    assert identity.config_hash(a) != identity.config_hash(make_cfg("seed=1"))
    assert identity.config_diff(identity.normalize(a), identity.normalize(make_cfg("lr=0.05"))) == ["lr: 0.1 -> 0.05"]


def _job(cfg, sweep_dir: Path, name="job", sweep_id: str | None = None) -> Job:
    return Job(cfg, sweep_dir / name, sweep=Sweep(sweep_dir, sweep_id))


def test_a_job_is_validated_again_only_when_its_sweeps_grid_lacks_its_config(tmp_path):
    """``cli.run_job`` validates a job only when ``Job.in_grid`` is False: the grid's check is the job's."""
    cfg = make_cfg("method=online", "seed=1")
    job = _job(cfg, tmp_path, sweep_id="s1")
    assert not job.in_grid()  # no grid.json (a sweeper other than the basic one)
    grid = {"sweep_id": "s1", "jobs": [{"dir": "job", "config_hash": identity.config_hash(cfg)}]}
    io.write_json_atomic(tmp_path / io.GRID_FILE, grid)
    assert job.in_grid()
    assert not _job(make_cfg("method=online", "seed=2"), tmp_path, "other", "s1").in_grid()  # a config it lacks
    assert not _job(cfg, tmp_path, sweep_id="s2").in_grid()  # the grid of an earlier sweep
    assert not _job(cfg, tmp_path).in_grid()  # a job outside a sweep


def test_resume_skip_rerun_on_change_retry_after_failure(tmp_path):
    from clsuite.run.experiment import run_experiment

    cfg = make_cfg("method=online")
    sdir = tmp_path / "multirun" / "table2"
    job = _job(cfg, sdir)
    assert job.finished() is None
    # a crash: failed.json with the error line, attempts counted
    job.failed(RuntimeError("boom\nsecond line"))
    job.failed(RuntimeError("boom again"))
    rec = json.loads(job.failed_path.read_text())
    assert rec["error"] == "RuntimeError: boom again" and rec["attempt"] == 2
    assert job.finished() is None  # a failed run is retried
    run_experiment(cfg, job.out_dir)
    job.succeeded(1.0)
    assert not job.failed_path.exists()  # removed on success
    # same config (logger / progress differ): skipped
    again = _job(make_cfg("method=online", "logger=csv", "trainer.progress_bar=true"), sdir)
    res, how = again.finished()
    assert how == "skipped" and res["method"] == "online"
    # changed config under the same folder: rerun, old results kept aside
    changed = _job(make_cfg("method=online", "lr=0.05"), sdir)
    assert changed.finished() is None
    assert (job.out_dir / "results.stale-1.json").is_file() and not job.results_path.exists()
    assert _job(make_cfg("method=online", "resume=off"), sdir).finished() is None
    log = [json.loads(line) for line in (sdir / io.LOG_FILE).read_text().splitlines()]
    assert [r["status"] for r in log] == ["failed", "failed", "ran"]


def test_reuse_across_experiments(tmp_path):
    from clsuite.run.experiment import run_experiment

    mr = tmp_path / "multirun"
    first = _job(make_cfg("method=online", "experiment=table2"), mr / "table2", "a")
    run_experiment(make_cfg("method=online", "experiment=table2"), first.out_dir)
    first.succeeded(1.0)
    other = _job(make_cfg("method=online", "experiment=memory"), mr / "memory", "b")
    res, how = other.finished()
    assert how == "reused" and res["reused_from"].endswith("table2/a/results.json")
    on_disk = json.loads(other.results_path.read_text())
    assert on_disk["config"]["experiment"] == "memory" and on_disk["R"] == res["R"]
    assert _job(make_cfg("method=online", "seed=1", "experiment=memory"), mr / "memory", "c").finished() is None
    assert _job(make_cfg("method=online", "experiment=tau", "reuse=false"), mr / "tau", "d").finished() is None


# ----------------------------------------------------------------------------- GPU pool


def test_gpu_pool_gives_each_job_its_own_gpu(tmp_path, monkeypatch):
    monkeypatch.setattr(gpus, "gpu_count", lambda: 2)
    monkeypatch.setattr(gpus, "GPU_LOCK_DIR", tmp_path)
    auto, got = {"accelerator": "auto"}, []
    with gpu_slot(auto, 2, job_num=0) as a, gpu_slot(auto, 2, job_num=0) as b:
        assert {a, b} == {0, 1}

        def third():
            with gpu_slot(auto, 2, job_num=0, poll_s=0.02) as c:
                got.append(c)

        t = threading.Thread(target=third)
        t.start()
        time.sleep(0.3)
        assert got == []  # both GPUs busy: the third job waits
    t.join(5)
    assert got in ([0], [1])
    # n_jobs=4 on 2 GPUs: two slots each, taken free GPUs first
    with gpu_slot(auto, 4, 1) as a, gpu_slot(auto, 4, 1) as b, gpu_slot(auto, 4, 1) as c:
        assert [a, b, c] == [1, 0, 1]
    # a device chosen: no slot
    with gpu_slot({"accelerator": "cpu"}, 2) as g:
        assert g is None
    with gpu_slot({"accelerator": "auto", "device_index": 1}, 2) as g:
        assert g is None


def test_a_gpu_pool_without_locks_fails_instead_of_waiting(tmp_path, monkeypatch):
    """It waited forever: every flock's OSError read as a slot held by another job."""
    import errno
    import fcntl

    def no_locks(f, how):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(gpus, "gpu_count", lambda: 1)
    monkeypatch.setattr(gpus, "GPU_LOCK_DIR", tmp_path)
    monkeypatch.setattr(fcntl, "flock", no_locks)
    never = gpu_slot({"accelerator": "auto"}, 1, poll_s=10)
    with pytest.raises(OSError, match=r"No locks available: the GPU pool needs flock in .*gpu0\.0\.lock") as e, never:
        pass
    assert e.value.errno == errno.ENOLCK and e.value.filename == str(tmp_path / "gpu0.0.lock")


_TWO_GPUS = f"""
import sys, tempfile
from pathlib import Path
sys.path.insert(0, {str(ROOT / "src")!r})
import clsuite.sweep.gpus as gpus
gpus.gpu_count = lambda: 2
gpus.GPU_LOCK_DIR = Path(tempfile.gettempdir()) / "locks"
"""


@pytest.mark.slow
def test_a_joblib_job_runs_on_its_pool_gpu_and_a_basic_one_takes_none(tmp_path):
    """launcher=joblib: each job records the GPU of its slot as its trainer.device_index (two GPUs
    faked, no CUDA: the run itself stays on the CPU); the basic launcher takes no slot."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(_TWO_GPUS)
    env = {**os.environ, "PYTHONPATH": str(hook), "TMPDIR": str(tmp_path)}
    cmd = [sys.executable, str(ROOT / "src" / "run.py"), "-m", "benchmark=synthetic", "logger=none"]
    cmd += ["trainer.progress_bar=false", "trainer.threads=1", "method=online", "seed=0,1", "reuse=false"]
    for launcher, want in (("joblib", {0: 0, 1: 1}), ("basic", {0: None, 1: None})):
        more = ["hydra.launcher.n_jobs=2"] if launcher == "joblib" else []
        run = [*cmd, f"launcher={launcher}", *more, f"hydra.sweep.dir={launcher}"]
        p = subprocess.run(run, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, p.stderr[-3000:]
        results = [json.loads(f.read_text()) for f in (tmp_path / launcher).rglob(io.RESULTS_FILE)]
        assert {r["seed"]: r["config"]["trainer"]["device_index"] for r in results} == want


# ----------------------------------------------------------------------------- whole sweeps (subprocess)


def run_sweep(tmp_path: Path, *overrides: str, name: str = "table2") -> subprocess.CompletedProcess:
    cmd = [
        sys.executable,
        str(ROOT / "src" / "run.py"),
        "--config-dir",
        str(SWEEPS_DIR),
        "--config-name",
        name,
        "benchmark=synthetic",
        "logger=none",
        "trainer=cpu",
        "trainer.progress_bar=false",
        f"hydra.sweep.dir={tmp_path}/multirun/{name}",
        *overrides,
    ]
    return subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600)


def test_sweep_end_to_end_crash_resume_and_tables(tmp_path):
    """Two jobs, one diverging: the other finishes, the sweep exits 1; a rerun skips the finished one
    and retries the failed one; the aggregation lists the failure beside the table."""
    args = ("method=online", "seed=0", "lr=0.1,1e6")
    p = run_sweep(tmp_path, *args)
    assert p.returncode == 1, p.stderr[-2000:]
    sdir = tmp_path / "multirun" / "table2"
    ok = sdir / "benchmark=synthetic,lr=0.1,method=online,seed=0"
    bad = sdir / "benchmark=synthetic,lr=1000000.0,method=online,seed=0"
    assert (ok / "results.json").is_file() and not (ok / "failed.json").exists()
    error = json.loads((bad / "failed.json").read_text())["error"]
    assert error.startswith("Diverged: loss is nan at step ") and " of task 1 " in error, error
    assert not (bad / "results.json").exists() and not list(sdir.rglob("running.lock"))
    assert "1 ran, 0 skipped" in p.stderr and "1 failed" in p.stderr
    grid = json.loads((sdir / "grid.json").read_text())
    assert grid["n_jobs"] == 2  # each job with the config its folder must hold (the sweep file's keys too)
    res = json.loads((ok / "results.json").read_text())
    assert {j["dir"]: j["config_hash"] for j in grid["jobs"]}[ok.name] == identity.config_hash(res["config"])

    p = run_sweep(tmp_path, *args)
    assert p.returncode == 1
    assert "0 ran, 1 skipped" in p.stderr and "1 failed" in p.stderr
    assert json.loads((bad / "failed.json").read_text())["attempt"] == 2

    from clsuite.analysis.report import aggregate

    res = aggregate("table2", tmp_path / "multirun", tmp_path / "results")
    assert res["runs"] == 1 and [f["job"] for f in res["status"]["failed"]] == [bad.name]
    md = (tmp_path / "results" / "table2" / "table2.md").read_text()
    assert "| Online" in md and "Diverged: loss is nan" in md


@pytest.mark.slow
@pytest.mark.parametrize("launcher", ["joblib", "submitit_local"])
def test_parallel_launchers_run_two_jobs(tmp_path, launcher):
    p = run_sweep(tmp_path, f"launcher={launcher}", "method=er,online", "seed=0")
    assert p.returncode == 0, p.stderr[-3000:]
    sdir = tmp_path / "multirun" / "table2"
    for m in ("er", "online"):
        assert (sdir / f"benchmark=synthetic,method={m},seed=0" / "results.json").is_file()
    assert "2 ran" in p.stderr
    # the sweep's id reached each job through its Hydra config (hydra.job.sweep_id), whatever the launcher
    sweep_id = json.loads((sdir / io.GRID_FILE).read_text())["sweep_id"]
    assert [json.loads(line)["sweep_id"] for line in (sdir / io.LOG_FILE).read_text().splitlines()] == [sweep_id] * 2
    if launcher == "submitit_local":
        assert (sdir / ".submitit").is_dir()
    # and a rerun skips both
    p = run_sweep(tmp_path, f"launcher={launcher}", "method=er,online", "seed=0")
    assert p.returncode == 0 and "0 ran, 2 skipped" in p.stderr


def test_results_copied_in_without_an_index_are_indexed_at_sweep_start_and_reused(tmp_path):
    """A results file that reached multirun/ without a sweep's bookkeeping (copied from another
    machine: no .index entry) was retrained by every other experiment; reindex() makes it reusable,
    reads each file once, and leaves hand-edited files out."""
    from clsuite.run.experiment import run_experiment

    mr = tmp_path / "multirun"
    copied = mr / "table2" / "a"
    run_experiment(make_cfg("method=online", "experiment=table2"), copied)  # no Job.register: no index
    edited = mr / "table2" / "b"
    run_experiment(make_cfg("method=online", "seed=1", "experiment=table2"), edited)
    res = json.loads((edited / "results.json").read_text())
    res["metrics"]["acc"] = 99.0  # a hand edit: the seal no longer matches
    (edited / "results.json").write_text(json.dumps(res))
    other = _job(make_cfg("method=online", "experiment=memory"), mr / "memory", "m")
    assert other.finished() is None  # no index entry yet: it would train again
    assert reindex(mr) == 1 and reindex(mr) == 0  # the copied file once; the edited one never
    res, how = other.finished()
    assert how == "reused" and res["reused_from"].endswith("table2/a/results.json")
    assert _job(make_cfg("method=online", "seed=1", "experiment=memory"), mr / "memory", "n").finished() is None
