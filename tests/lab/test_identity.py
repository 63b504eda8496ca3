"""Runs a user can trust: identity-checked resume, pinned threads, locks, divergence, signals,
failure records that cannot fail, hashed folder names, grid.json only after every job composed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from clsuite.cli import Interrupted, Invocation
from clsuite.config.check import ConfigError
from clsuite.config.paths import MAX_DIRNAME, job_dirname
from clsuite.core.callbacks import Diverged, DivergenceGuard
from clsuite.core.data import sources
from clsuite.run import identity, io
from clsuite.run.experiment import run_experiment
from clsuite.sweep.grid import validate_grid
from clsuite.sweep.job import Job
from clsuite.sweep.locks import HOST, JobLock, live_holder
from clsuite.sweep.summary import summarize
from tests.conftest import CONF_DIR, expected_identity, make_cfg

ROOT = Path(__file__).resolve().parents[2]


def _job(cfg, sdir: Path, name="job") -> Job:
    return Job(cfg, sdir / name, sweep_dir=sdir)


# ----------------------------------------------------------------------------- identity


def test_results_record_the_identity_the_job_expected(tmp_path):
    cfg = make_cfg("method=er")
    job = _job(cfg, tmp_path)
    expected = job.expected()
    res = run_experiment(cfg, job.out_dir)
    assert res["identity"] == expected  # what resume compares is what the run recorded
    assert set(expected) == {"key", "config", "code", "data", "env", "provenance"}
    assert expected["env"]["torch_threads"] == 1 and expected["env"]["device_type"] == "cpu"
    assert expected["env"]["torch"] == torch.__version__
    assert expected["key"] == identity.sha256(
        identity.canonical({k: expected[k] for k in ("config", "code", "data", "env")})
    )
    assert res["reading"] == make_cfg().get("reading")
    on_disk = json.loads((job.out_dir / io.RESULTS_FILE).read_text())
    assert identity.seal_ok(on_disk)
    on_disk["R"][0][0] += 1.0  # a hand edit
    assert not identity.seal_ok(on_disk)


def test_differences_name_what_changed():
    base = expected_identity(make_cfg())
    assert identity.differences(base, base) == []
    assert identity.differences(base, expected_identity(make_cfg("seed=7"))) == [("config", "seed: 0 -> 7")]
    code = {**base, "code": {"commit": "abc", "dirty_hash": None}, "key": "k1"}
    assert [r for r, _ in identity.differences(code, base)] == ["code"]
    env = {**base, "env": {**base["env"], "torch_threads": 2}, "key": "k2"}
    assert [r for r, _ in identity.differences(env, base)] == ["threads"]
    dev = {**base, "env": {**base["env"], "device_type": "cuda"}, "key": "k3"}
    assert [r for r, _ in identity.differences(dev, base)] == ["device"]
    assert [r for r, _ in identity.differences(None, base)] == ["no identity"]


# ----------------------------------------------------------------------------- code: content, not commit


def _tree(base: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (base / name).parent.mkdir(parents=True, exist_ok=True)
        (base / name).write_text(text)


_PACKAGE = {
    "__init__.py": "",
    "methods/er.py": "LR = 0.1\n",
    "analysis/load.py": "def load(): ...\n",
}
_CONF = {"config.yaml": "seed: 0\n", "method/er.yaml": "name: er\n"}


def _checkout(root: Path) -> tuple[Path, Path]:
    """A checkout: src/clsuite, conf/, src/run.py, src/hydra_plugins."""
    _tree(root / "src" / "clsuite", _PACKAGE)
    _tree(root / "conf", _CONF)
    _tree(root / "src" / "hydra_plugins", {"clsuite_launcher.py": "from clsuite.sweep import launcher\n"})
    (root / "src" / "run.py").write_text("from clsuite.cli import main\n")
    return root / "src" / "clsuite", root / "conf"


def test_code_hash_is_the_content_of_the_files_a_run_executes(tmp_path):
    pkg, conf = _checkout(tmp_path / "repo")
    src = pkg.parent

    def h():
        return identity.code_hash(pkg, conf)

    h0 = h()
    assert len(h0) == 16 and int(h0, 16) >= 0
    assert sorted(identity.code_files(pkg, conf)) == [
        "clsuite/__init__.py",
        "clsuite/methods/er.py",
        "conf/config.yaml",
        "conf/method/er.yaml",
    ]
    # what a run never executes: documentation, the analysis package, byte code, editor files; and
    # what only a checkout or only a wheel has, which computes nothing: src/run.py (sys.path) and the
    # launcher's declaration in Hydra's plugin namespace
    (pkg / "README.md").write_text("notes")
    (conf / "method" / "NOTES.md").write_text("notes")
    (pkg / "analysis" / "load.py").write_text("def load(): return 1\n")
    (pkg / "analysis" / "tables.py").write_text("TABLES = 2\n")
    _tree(pkg / "methods" / "__pycache__", {"er.cpython-311.pyc": "bytes", "er.py": "x = 1\n"})
    (pkg / ".er.py.swp.py").write_text("x")
    (src / "run.py").write_text("from clsuite.cli import main  # edited\n")
    (src / "hydra_plugins" / "clsuite_launcher.py").write_text("from clsuite.sweep import launcher as l\n")
    assert h() == h0
    # what it does: a method, a config, a new module
    for name, text in [(pkg / "methods" / "er.py", "LR = 0.2\n"), (conf / "method" / "er.yaml", "name: er\nlr: 0.2\n")]:
        before = name.read_text()
        name.write_text(text)
        assert h() != h0, name
        name.write_text(before)
        assert h() == h0, name
    (pkg / "methods" / "new.py").write_text("")
    assert h() != h0
    (pkg / "methods" / "new.py").unlink()
    # a rename moves the name, not the bytes
    (pkg / "methods" / "er.py").rename(pkg / "methods" / "er2.py")
    assert h() != h0
    (pkg / "methods" / "er2.py").rename(pkg / "methods" / "er.py")
    (conf / "method" / "er.yaml").rename(conf / "method" / "er_b.yaml")
    assert h() != h0


def test_a_wheel_layout_counts_its_packaged_configs_once_as_conf(tmp_path):
    pkg, conf = _checkout(tmp_path / "repo")
    site = tmp_path / "site-packages"  # a wheel: clsuite/ with its configs in clsuite/conf
    _tree(site / "clsuite", _PACKAGE)
    _tree(site / "clsuite" / "conf", _CONF)
    assert identity.code_files(site / "clsuite", site / "clsuite" / "conf").keys() == (
        identity.code_files(pkg, conf).keys()
    )
    assert identity.code_hash(site / "clsuite", site / "clsuite" / "conf") == identity.code_hash(pkg, conf)
    (site / "clsuite" / "conf" / "method" / "er.yaml").write_text("name: er\nlr: 0.2\n")
    assert identity.code_hash(site / "clsuite", site / "clsuite" / "conf") != identity.code_hash(pkg, conf)


def test_this_checkouts_code_identity_needs_no_git(monkeypatch):
    from clsuite.config.check import CONF_DIR

    names = identity.code_files(identity.PACKAGE_DIR, CONF_DIR)
    assert {"clsuite/run/identity.py", "clsuite/cli.py", "conf/config.yaml"} <= set(names)
    assert not [n for n in names if n.startswith("clsuite/analysis/") or not n.endswith((".py", ".yaml"))]
    assert not [n for n in names if not n.startswith(("clsuite/", "conf/"))]  # no run.py, no hydra_plugins
    real = identity.code_identity()
    assert real == {"hash": identity.code_hash(identity.PACKAGE_DIR, CONF_DIR)}

    def no_git(*a):
        raise AssertionError("the code identity does not ask git")

    monkeypatch.setattr(identity, "_git", no_git)
    assert identity.code_identity.__wrapped__() == real  # the same whatever the commit


def test_the_key_ignores_provenance_and_follows_the_code(monkeypatch):
    """A README or docs-only commit moves the commit, never the key; a change of code does."""
    cfg = make_cfg()
    prov = {"commit": "a" * 40, "dirty": False, "version": None}
    monkeypatch.setattr(identity, "provenance", lambda: prov)
    a = expected_identity(cfg)
    monkeypatch.setattr(identity, "provenance", lambda: {"commit": "b" * 40, "dirty": True, "version": "0.2.0"})
    b = expected_identity(cfg)
    assert a["provenance"] == prov and b["provenance"]["commit"] == "b" * 40
    assert a["key"] == b["key"] and identity.differences(a, b) == []
    monkeypatch.setattr(identity, "code_identity", lambda: {"hash": "0123456789abcdef"})
    c = expected_identity(cfg)
    assert c["key"] != b["key"]
    assert identity.differences(a, c) == [
        ("code", f"code hash {a['code']['hash']} -> 0123456789abcdef (commit aaaaaaaaaa -> commit bbbbbbbbbb+dirty)")
    ]


def test_provenance_records_the_commit_and_uncommitted_changes():
    prov = identity.provenance()
    assert set(prov) == {"commit", "dirty", "version"}
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode == 0:  # a checkout (not an unpacked sdist)
        assert prov["commit"] == head.stdout.strip() and isinstance(prov["dirty"], bool)
        changes = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=all", "--", "src", "conf"],
            capture_output=True,
            text=True,
        ).stdout
        assert prov["dirty"] == bool(changes.strip())


def test_an_identity_from_before_content_hashes_differs_in_code():
    new = expected_identity(make_cfg())
    old = {k: v for k, v in new.items() if k != "provenance"}
    old |= {"code": {"commit": "abc1234def5678", "dirty_hash": "0123456789abcdef"}, "key": "an old key"}
    assert identity.differences(old, new) == [
        (
            "code",
            f"made by commit abc1234def+dirty before content hashes; now {new['code']['hash']} ({identity.made_by(new)})",
        )
    ]
    installed = {**old, "code": {"commit": None, "version": "0.1.0", "dirty_hash": "0123"}, "config": {"seed": 9}}
    assert [r for r, _ in identity.differences(installed, new)] == ["config", "code"]
    assert "made by version 0.1.0 before content hashes" in identity.differences(installed, new)[1][1]


# A training run, as a sweep starts it, never imports clsuite.analysis (so its files are not code).
_NO_ANALYSIS = """
import atexit, json, runpy, sys
def report():
    print("MODULES " + json.dumps({"analysis": sorted(m for m in sys.modules if m.startswith("clsuite.analysis")),
                                   "experiment": "clsuite.run.experiment" in sys.modules}))
atexit.register(report)
sys.argv = [RUN, *sys.argv[1:]]
runpy.run_path(RUN, run_name="__main__")
"""


def test_a_training_run_never_imports_the_analysis_package(tmp_path):
    from tests.lab.test_sweeps import SWEEPS_DIR

    cmd = [sys.executable, "-c", _NO_ANALYSIS.replace("RUN", repr(str(ROOT / "src" / "run.py")))]
    cmd += ["--config-dir", str(SWEEPS_DIR), "--config-name", "table2", "-m", "benchmark=synthetic", "logger=csv"]
    cmd += ["trainer=cpu", "trainer.progress_bar=false", "method=er", "seed=0", f"hydra.sweep.dir={tmp_path}/mr"]
    p = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    assert len(list((tmp_path / "mr").rglob(io.RESULTS_FILE))) == 1
    line = [x for x in p.stdout.splitlines() if x.startswith("MODULES ")][-1]
    assert json.loads(line.removeprefix("MODULES ")) == {"analysis": [], "experiment": True}
    assert "clsuite/analysis/load.py" not in identity.code_files(identity.PACKAGE_DIR, CONF_DIR)


def test_data_identity_is_the_md5_of_the_files_read(tmp_path):
    from clsuite.core.data.files import MNIST_LIKE, md5

    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for i, f in enumerate(MNIST_LIKE["MNIST"]["files"]):
        (raw / f).write_bytes(bytes([i]) * 10)
    cfg = make_cfg("benchmark=split_mnist", f"data.root={tmp_path}")
    a = identity.data_identity(cfg, sources.bind(cfg.benchmark))["files"]
    assert a["MNIST/raw/t10k-labels-idx1-ubyte.gz"] == md5(raw / "t10k-labels-idx1-ubyte.gz")
    time.sleep(0.01)
    (raw / "t10k-labels-idx1-ubyte.gz").write_bytes(b"other bytes")  # new size and mtime: hashed again
    b = identity.data_identity(cfg, sources.bind(cfg.benchmark))["files"]
    assert [k for k in a if a[k] != b[k]] == ["MNIST/raw/t10k-labels-idx1-ubyte.gz"]


def test_threads_are_pinned_for_torch_and_blas(tmp_path):
    from threadpoolctl import threadpool_info

    torch.set_num_threads(2)
    try:
        res = run_experiment(make_cfg("method=online", "trainer.threads=1"), tmp_path)
        assert torch.get_num_threads() == 1
        assert {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"} <= {1}
        assert res["identity"]["env"]["torch_threads"] == 1
        identity.pin_threads(2)
        assert (
            torch.get_num_threads() == 2
            and expected_identity(make_cfg("trainer.threads=1"))["env"]["torch_threads"] == 1
        )
    finally:
        torch.set_num_threads(1)


def test_ignored_keys_and_folder_name_exclusions_agree():
    """One list (identity.IGNORED_KEYS); Hydra's exclude_keys = it + groups/keys that only set ignored keys."""
    conf = OmegaConf.load(Path(CONF_DIR) / "config.yaml")
    exclude = list(conf.hydra.job.config.override_dirname.exclude_keys)
    for key in identity.IGNORED_KEYS:
        assert key in exclude, key
    a, b = make_cfg("trainer=cpu"), make_cfg("trainer=default")
    for key in exclude:
        top = key.split(".")[0]
        if key in identity.IGNORED_KEYS or key.startswith("hydra.") or top in ("logger", "launcher"):
            continue
        assert key == "trainer" and identity.normalize(a) == identity.normalize(b), key


# ----------------------------------------------------------------------------- strict resume


def test_strict_resume_reruns_after_a_code_change_and_counts_why(tmp_path, monkeypatch, capsys):
    cfg = make_cfg("method=online")
    sdir = tmp_path / "multirun" / "exp"
    first = _job(cfg, sdir)
    assert first.finished() is None
    run_experiment(cfg, first.out_dir)
    first.succeeded(1.0)
    assert _job(cfg, sdir).finished()[1] == "skipped"
    # the code changed: strict resume reruns, keeps the old file, and says why
    real = identity.code_identity()
    monkeypatch.setattr(identity, "code_identity", lambda: {"hash": "0123456789abcdef"})
    again = _job(cfg, sdir)
    assert again.finished() is None and again.rerun_reasons == ["code"]
    assert (first.out_dir / "results.stale-1.json").is_file() and not again.results_path.exists()
    assert f"code changed (code hash {real['hash']} -> 0123456789abcdef (" in capsys.readouterr().err
    run_experiment(cfg, again.out_dir)
    again.succeeded(1.0)
    s = summarize(sdir)
    assert s["ran"] == 2 and s["reruns"] == {"code": 1}
    # config_only: the same config is enough
    monkeypatch.setattr(identity, "code_identity", lambda: {"hash": "fedcba9876543210"})
    assert _job(cfg, sdir).finished() is None
    monkeypatch.setattr(identity, "code_identity", lambda: real)
    run_experiment(cfg, again.out_dir)
    monkeypatch.setattr(identity, "code_identity", lambda: {"hash": "fedcba9876543210"})
    assert _job(make_cfg("method=online", "resume=config_only"), sdir).finished()[1] == "skipped"


def test_threads_and_hand_edits_and_old_files_rerun(tmp_path):
    cfg = make_cfg("method=online")
    sdir = tmp_path / "multirun" / "exp"
    job = _job(cfg, sdir)
    run_experiment(cfg, job.out_dir)
    assert (
        _job(make_cfg("method=online", "trainer.threads=2"), sdir).mismatch(json.loads(job.results_path.read_text()))[
            0
        ][0]
        == "threads"
    )
    res = json.loads(job.results_path.read_text())
    res["metrics"]["acc"] = 99.0
    job.results_path.write_text(json.dumps(res))
    j = _job(cfg, sdir)
    assert j.finished() is None and j.rerun_reasons == ["edited"]
    res = {k: v for k, v in res.items() if k not in ("identity", "digest")}  # a file made before identities
    job.results_path.write_text(json.dumps(res))
    j = _job(cfg, sdir)
    assert j.finished() is None and j.rerun_reasons == ["no identity"]


def test_reuse_needs_the_whole_identity(tmp_path, monkeypatch):
    mr = tmp_path / "multirun"
    first = _job(make_cfg("method=online", "experiment=table2"), mr / "table2", "a")
    run_experiment(make_cfg("method=online", "experiment=table2"), first.out_dir)
    first.succeeded(1.0)
    _, how = _job(make_cfg("method=online", "experiment=memory"), mr / "memory", "b").finished()
    assert how == "reused" and identity.seal_ok(json.loads((mr / "memory" / "b" / io.RESULTS_FILE).read_text()))
    monkeypatch.setattr(identity, "code_identity", lambda: {"hash": "0123456789abcdef"})
    assert _job(make_cfg("method=online", "experiment=tau"), mr / "tau", "c").finished() is None


def test_a_test_and_its_subprocesses_see_no_clsuite_variable():
    assert [k for k in os.environ if k.startswith("CLSUITE_")] == []
    code = "import os; print(sorted(k for k in os.environ if k.startswith('CLSUITE_')))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout == "[]\n"


def test_the_tests_pass_under_the_callers_clsuite_variables(tmp_path):
    """A shell holding the suite's variables: the reuse test passes, and no test or subprocess of it
    sees them (tests/conftest.py)."""
    caller = {"CLSUITE_REUSE": "0", "CLSUITE_SWEEP_ID": "other"}  # retired, and an older version's
    tests = [test_reuse_needs_the_whole_identity, test_a_test_and_its_subprocesses_see_no_clsuite_variable]
    p = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "0", "-rA", "-p", "no:cacheprovider", f"--basetemp={tmp_path / 't'}",
         *(f"{__file__}::{t.__name__}" for t in tests)],
        cwd=ROOT, env={**os.environ, **caller}, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert p.returncode == 0 and p.stdout.count("PASSED tests/lab/test_identity.py::") == 2, p.stdout[-3000:]


# ----------------------------------------------------------------------------- locks


_HOLDS_THE_LOCK = """import sys
from clsuite.sweep.locks import JobLock
lock = JobLock(sys.argv[1])
lock.acquire()
print(flush=True)
input()
"""


def test_job_lock_atomic_holder_and_stale(tmp_path):
    a, b = JobLock(tmp_path), JobLock(tmp_path)
    assert a.acquire() is None
    holder = b.acquire()
    assert holder["pid"] == os.getpid() and holder["host"] == HOST  # held by a live process: busy
    a.release()
    assert not (tmp_path / io.LOCK_FILE).exists()
    assert b.acquire() is None
    b.release()
    # a lock whose process died (kill -9, its file left) is taken over: the kernel freed its flock
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    cmd = [sys.executable, "-c", _HOLDS_THE_LOCK, str(tmp_path)]
    with subprocess.Popen(cmd, env=env, text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE) as p:
        assert p.stdout.readline() == "\n"
        assert JobLock(tmp_path).acquire() == {"pid": p.pid, "host": HOST, "sweep_id": None}  # alive: busy
        assert live_holder(tmp_path / io.LOCK_FILE)["pid"] == p.pid  # for the summary too
        p.kill()
    assert json.loads((tmp_path / io.LOCK_FILE).read_text())["pid"] == p.pid
    assert live_holder(tmp_path / io.LOCK_FILE) is None
    c = JobLock(tmp_path)
    assert c.acquire() is None and json.loads((tmp_path / io.LOCK_FILE).read_text())["pid"] == os.getpid()
    c.release()


def test_a_job_starting_during_a_summary_probe_takes_its_lock(tmp_path):
    """The summary's probe (live_holder) holds a shared flock for an instant; a job asking then was told
    "busy" and left for a rerun. It now retries for PROBE_GRACE_S."""
    import fcntl
    import threading

    path, probing, done = tmp_path / io.LOCK_FILE, threading.Event(), threading.Event()
    path.write_text("")

    def probe():  # a probe that lasts 50 ms instead of microseconds
        with open(path) as f:
            fcntl.flock(f, fcntl.LOCK_SH)
            probing.set()
            time.sleep(0.05)
            fcntl.flock(f, fcntl.LOCK_UN)
        done.set()

    t = threading.Thread(target=probe)
    t.start()
    probing.wait(5)
    lock = JobLock(tmp_path)
    assert lock.acquire() is None and done.is_set()  # taken once the probe let go
    lock.release()
    t.join(5)


# ----------------------------------------------------------------------------- divergence


class _FakeLearner:
    def __init__(self):
        self.device, self.current_task, self.lr, self.last_loss = torch.device("cpu"), 2, 0.1, None


def test_divergence_guard_names_the_first_bad_step_and_task():
    guard, learner = DivergenceGuard(check_every=10), _FakeLearner()
    guard.on_train_start(None, learner)
    for v in (1.0, 0.5, float("inf"), float("nan")):
        learner.last_loss = torch.tensor(v)
        guard.on_train_batch_end(None, learner, None, None, 0)  # no check yet: no sync per step
    with pytest.raises(Diverged, match=r"^loss is inf at step 3 of task 3 \(lr=0.1\)"):
        guard.on_train_epoch_end(None, learner)


def test_lr_1e6_fails_with_no_results_file(tmp_path):
    with pytest.raises(Diverged, match=r"loss is (nan|inf) at step \d+ of task 1 "):
        run_experiment(make_cfg("method=er", "lr=1e6"), tmp_path)
    assert not (tmp_path / io.RESULTS_FILE).exists()


# ----------------------------------------------------------------------------- signals


def test_sigterm_during_training_raises_interrupted(tmp_path, monkeypatch):
    original = DivergenceGuard.on_train_batch_end

    def term_at_step_3(self, trainer, learner, *a):
        original(self, trainer, learner, *a)
        if learner.train_steps == 3:
            os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(DivergenceGuard, "on_train_batch_end", term_at_step_3)
    handler = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Interrupted) as e, Invocation().interruptible():
        run_experiment(make_cfg("method=er"), tmp_path)
    assert e.value.exit_code == 143 and str(e.value) == "interrupted by SIGTERM"
    assert not (tmp_path / io.RESULTS_FILE).exists()
    assert signal.getsignal(signal.SIGTERM) == handler  # restored


def _at_step_2(seed_var: str, action: str) -> str:
    """Python source that patches run_experiment and the per-step hook so that, at step 2 of the run
    whose seed is ``$seed_var``, the process runs ``action`` (indented code) on itself."""
    return f"""
import os, signal, sys
from pathlib import Path
sys.path.insert(0, {str(ROOT / "src")!r})
import clsuite.run.experiment as ex
from clsuite.core.callbacks import DivergenceGuard
_run, _step = ex.run_experiment, DivergenceGuard.on_train_batch_end
def run(cfg, out, **kw):
    os.environ["SEED_NOW"] = str(cfg.seed)
    return _run(cfg, out, **kw)
def step(self, trainer, learner, *a):
    _step(self, trainer, learner, *a)
    if learner.train_steps == 2 and os.environ.get("SEED_NOW") == os.environ.get({seed_var!r}):
{action}
ex.run_experiment, DivergenceGuard.on_train_batch_end = run, step
"""


# clsuite.cli.main in a subprocess that sends itself SIGTERM at step 2 of the run of seed $TERM_SEED.
_TERM = _at_step_2("TERM_SEED", "        os.kill(os.getpid(), signal.SIGTERM)") + (
    "from clsuite.cli import main\nmain(sys.argv[1:])\n"
)


def _cli(tmp_path, *args, term_seed=None):
    env = {**os.environ, "TERM_SEED": str(term_seed)}
    base = ["benchmark=synthetic", "logger=none", "trainer=cpu", "trainer.progress_bar=false", "method=online"]
    flags = [a for a in args if a.startswith("-")]
    return subprocess.run(
        [
            sys.executable,
            "-c",
            _TERM,
            *flags,
            *base,
            *(a for a in args if a not in flags),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_sigterm_exits_143_with_a_message(tmp_path):
    p = _cli(tmp_path, "seed=0", term_seed=0)
    assert p.returncode == 143, p.stderr[-2000:]
    assert p.stderr.strip().splitlines()[-1].startswith("error: interrupted by SIGTERM; the run stopped before its end")
    assert not list(tmp_path.rglob("results.json"))


@pytest.mark.slow
def test_sigterm_in_a_sweep_records_the_job_and_the_rerun_retries_it(tmp_path):
    # job seed=0 interrupted -> the sweep stops (143), the job is recorded; the rerun retries it
    p = _cli(tmp_path, "-m", "seed=0,1", "hydra.sweep.dir=multirun/s", term_seed=0)
    assert p.returncode == 143, p.stderr[-2000:]
    job0 = tmp_path / "multirun/s/benchmark=synthetic,method=online,seed=0"
    rec = json.loads((job0 / "failed.json").read_text())
    assert rec["status"] == "interrupted" and rec["error"] == "Interrupted: interrupted by SIGTERM"
    assert not (job0 / io.LOCK_FILE).exists()
    p = _cli(tmp_path, "-m", "seed=0,1", "hydra.sweep.dir=multirun/s")
    assert p.returncode == 0, p.stderr[-2000:]
    assert "2 ran, 0 skipped" in p.stderr and not (job0 / "failed.json").exists()


@pytest.mark.slow
def test_sigterm_of_a_joblib_sweep_says_its_training_jobs_are_recorded(tmp_path):
    # The jobs train in joblib workers, so the sweep process itself starts none: its message said
    # "the sweep stopped during start-up, before any training; no results written" while a job had trained.
    hook = tmp_path / "hook"
    hook.mkdir()  # every process of the sweep imports it; the worker training seed 0 signals the sweep at step 2
    kill = "        from hydra.core.hydra_config import HydraConfig\n"  # (the sweep's pid: its job config)
    kill += "        os.kill(HydraConfig.get().job.sweep_pid, signal.SIGTERM)"
    (hook / "sitecustomize.py").write_text(_at_step_2("TERM_SEED", kill))
    env = {**os.environ, "PYTHONPATH": str(hook), "TERM_SEED": "0"}
    base = ["benchmark=synthetic", "logger=none", "trainer=cpu", "trainer.progress_bar=false", "method=online"]
    cmd = [sys.executable, str(ROOT / "src/run.py"), "-m", *base, "seed=0,1", "launcher=joblib"]
    cmd += ["hydra.launcher.n_jobs=2", "hydra.sweep.dir=multirun/s"]
    p = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 143, p.stderr[-3000:]
    last = p.stderr.strip().splitlines()[-1]
    assert last == (
        "error: interrupted by SIGTERM; the sweep stopped, interrupted jobs are recorded (failed.json) "
        "and a rerun retries them"
    ), p.stderr[-3000:]
    rec = json.loads((tmp_path / "multirun/s/benchmark=synthetic,method=online,seed=0/failed.json").read_text())
    assert rec["status"] == "interrupted"


# ----------------------------------------------------------------------------- failures, names, grid


def test_failure_record_survives_a_full_disk(tmp_path, monkeypatch):
    job = _job(make_cfg(), tmp_path)

    def full(fd, *a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    line = job.failed(RuntimeError("boom"))  # does not raise
    assert line == "RuntimeError: boom" and not job.failed_path.exists()
    assert not [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]


def test_long_override_lists_get_a_hashed_folder(tmp_path):
    from tests.lab.test_sweeps import compose_sweep

    long = "x" * 300
    assert job_dirname("a=1,b=2") == "a=1,b=2"
    name = job_dirname(f"a=1,b={long},c=2")
    assert len(name) <= MAX_DIRNAME and name.startswith("a=1,hash=")
    assert name != job_dirname(f"a=1,b={long},c=3")
    cfg = compose_sweep("table2", "method=er", "seed=0", "benchmark=synthetic", f"+logger.note={long}")
    assert OmegaConf.to_container(cfg.hydra.sweep, resolve=False)["subdir"].startswith("${clsuite_dirname:")
    job = Job(make_cfg(), tmp_path / name, sweep_dir=tmp_path, overrides=["a=1", f"b={long}", "c=2"])
    job.write_overrides()
    assert json.loads((tmp_path / name / io.OVERRIDES_FILE).read_text())[1] == f"b={long}"


def test_a_bad_job_stops_the_sweep_before_grid_json(tmp_path):
    from tests.lab.test_sweeps import run_sweep

    sdir = tmp_path / "multirun" / "table2"
    sdir.mkdir(parents=True)
    (sdir / io.GRID_FILE).write_text('{"jobs": "the previous sweep"}')
    p = run_sweep(tmp_path, "method=online", "seed=0", "lr=0.1,nan")
    assert p.returncode == 2
    assert p.stderr.strip().splitlines()[-1].startswith("error: lr must be a finite number, got nan (job ")
    assert (sdir / io.GRID_FILE).read_text() == '{"jobs": "the previous sweep"}'
    assert not list(sdir.rglob("results.json"))


@pytest.mark.parametrize("n_jobs", [0, -2])
def test_joblib_n_jobs_is_checked(n_jobs):
    from tests.lab.test_sweeps import compose_sweep

    cfg = compose_sweep("table2", "launcher=joblib", f"hydra.launcher.n_jobs={n_jobs}")
    with pytest.raises(
        ConfigError,
        match=rf"^hydra.launcher.n_jobs must be a whole number >= 1 \(or -1: one per core\), got {n_jobs}$",
    ):
        validate_grid(cfg, [])


def test_two_runs_started_together_get_two_folders(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    args = ["benchmark=synthetic", "logger=csv", "trainer=cpu", "trainer.progress_bar=false", "method=online"]
    procs = [
        subprocess.Popen([sys.executable, str(ROOT / "src" / "run.py"), *args, f"seed={s}"], cwd=tmp_path, env=env)
        for s in (0, 1)
    ]
    assert [p.wait(timeout=300) for p in procs] == [0, 0]
    results = sorted(tmp_path.rglob("results.json"))
    assert len(results) == 2 and results[0].parent != results[1].parent
    assert sorted(json.loads(r.read_text())["seed"] for r in results) == [0, 1]


# A worker that kills itself (SIGKILL) at step 2 of the run of seed $KILL_SEED: once ($KILL_ONCE
# names a marker file) or every time. Loaded in every process through PYTHONPATH (sitecustomize).
_KILL = _at_step_2(
    "KILL_SEED",
    """        once = os.environ.get("KILL_ONCE")
        if not once or not Path(once).exists():
            if once:
                Path(once).touch()
            os.kill(os.getpid(), signal.SIGKILL)""",
)


def _sweep_with_a_killer(tmp_path, once: bool, seeds="0,1,2,3"):
    hook = tmp_path / "hook"
    hook.mkdir(parents=True, exist_ok=True)
    (hook / "sitecustomize.py").write_text(_KILL)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(hook), str(ROOT / "src")]),
        "KILL_SEED": "1",
        "KILL_ONCE": str(tmp_path / "killed-once") if once else "",
    }
    cmd = [sys.executable, str(ROOT / "src" / "run.py"), "-m", "benchmark=synthetic", "logger=none", "trainer=cpu"]
    cmd += [
        "trainer.progress_bar=false",
        "method=online",
        f"seed={seeds}",
        "launcher=joblib",
        "hydra.launcher.n_jobs=2",
    ]
    cmd += [f"hydra.sweep.dir={tmp_path}/multirun/k"]
    return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_a_killed_joblib_worker_ends_only_its_job(tmp_path):
    p = _sweep_with_a_killer(tmp_path, once=True)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "a joblib worker died" in p.stderr
    assert len(list((tmp_path / "multirun/k").rglob("results.json"))) == 4  # the killed job reran alone
    p = _sweep_with_a_killer(tmp_path / "again", once=False)
    assert p.returncode == 1, p.stderr[-3000:]
    sdir = tmp_path / "again/multirun/k"
    assert len(list(sdir.rglob("results.json"))) == 3
    rec = json.loads((sdir / "benchmark=synthetic,method=online,seed=1" / "failed.json").read_text())
    assert rec["error"] == "RuntimeError: worker process died (killed by a signal or out of memory)"
    assert not list(sdir.rglob("running.lock"))


@pytest.mark.slow
@pytest.mark.exact
def test_basic_and_joblib_give_identical_results(tmp_path):
    from tests.lab.test_sweeps import run_sweep

    methods = "online,er,gem,mir"
    for launcher in ("basic", "joblib"):
        (tmp_path / launcher).mkdir()
        p = run_sweep(
            tmp_path / launcher,
            f"launcher={launcher}",
            f"method={methods}",
            "seed=0",
            "hydra.launcher.n_jobs=2" if launcher == "joblib" else "resume=strict",
        )
        assert p.returncode == 0, p.stderr[-3000:]
    for m in methods.split(","):
        name = f"benchmark=synthetic,method={m},seed=0"
        a, b = (
            json.loads((tmp_path / lau / "multirun/table2" / name / "results.json").read_text())
            for lau in ("basic", "joblib")
        )
        assert a["R"] == b["R"], m
        assert a["identity"]["key"] == b["identity"]["key"]


def _job_hc(sdir: Path, name: str):
    """The Hydra config :func:`clsuite.cli.run_job` reads, for job ``name`` of the basic launcher's sweep ``sdir``."""
    return OmegaConf.create(
        {
            "runtime": {"output_dir": str(sdir / name)},
            "sweep": {"dir": str(sdir)},
            "overrides": {"task": name.split(",")},
            "job": {"num": 0},
            "launcher": {"_target_": "hydra._internal.core_plugins.basic_launcher.BasicLauncher"},
        }
    )


def test_a_job_held_by_another_process_is_left_alone(tmp_path):
    """A second sweep (or a rerun) reaching a job whose lock a live process holds does not train it."""
    from clsuite.cli import run_job

    sdir, name = tmp_path / "multirun" / "exp", "method=online,seed=0"
    other = JobLock(sdir / name)  # the first sweep, still running this job
    assert other.acquire() is None
    hc = _job_hc(sdir, name)
    assert run_job(make_cfg("method=online"), hc) is None
    assert not (sdir / name / io.RESULTS_FILE).exists()
    assert [json.loads(line)["status"] for line in (sdir / io.LOG_FILE).read_text().splitlines()] == ["busy"]
    other.release()
    assert run_job(make_cfg("method=online"), hc) is not None  # free again: it trains
    assert (sdir / name / io.RESULTS_FILE).is_file() and not (sdir / name / io.LOCK_FILE).exists()


def test_a_file_system_without_locks_fails_the_job_with_one_error_line(tmp_path, monkeypatch, capsys):
    """Where flock is refused (NFS without its lock service: ENOLCK) a job cannot know it runs alone:
    one `error:` line naming its lock file, recorded failed, nothing trained; the sweep goes on."""
    import errno
    import fcntl

    from clsuite.cli import run_job

    def no_locks(fd, operation):
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    sdir, name = tmp_path / "multirun" / "exp", "method=online,seed=0"
    monkeypatch.setattr(fcntl, "flock", no_locks)
    assert run_job(make_cfg("method=online"), _job_hc(sdir, name)) is None
    monkeypatch.undo()
    line = f"OSError: No locks available: {sdir / name / io.LOCK_FILE}"
    assert capsys.readouterr().err.splitlines() == [f"error: {name}: {line} (details: {sdir / name / io.FAILED_FILE})"]
    assert json.loads((sdir / name / io.FAILED_FILE).read_text())["error"] == line
    assert not (sdir / name / io.RESULTS_FILE).exists()
    assert summarize(sdir, None, [{"overrides": [], "dir": name}])["failed"] == 1


def test_a_stock_lightning_callback_runs_and_enters_the_identity(tmp_path):
    """+callbacks.timer._target_=lightning.pytorch.callbacks.Timer: the run trains with it (built with its own
    arguments, not the suite's run) and its identity holds it, while the suite's bookkeeping callbacks stay
    out (a default run's normalised config has no callbacks at all)."""
    from clsuite.run.experiment import run_experiment
    from clsuite.run.results import normalize

    tiny = ["method=er", "benchmark.n_tasks=2", "benchmark.train_per_class=20", "memory=10"]
    plain, timed = make_cfg(*tiny), make_cfg(*tiny, "+callbacks.timer._target_=lightning.pytorch.callbacks.Timer")
    assert "callbacks" not in normalize(plain)
    assert normalize(timed)["callbacks"] == {"timer": {"_target_": "lightning.pytorch.callbacks.Timer"}}
    assert identity.config_hash(plain) != identity.config_hash(timed)
    res = run_experiment(timed, tmp_path)
    assert np.asarray(res["R"]).shape == (2, 2)
