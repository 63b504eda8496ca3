"""Issue 20: results that cannot be forged, mixed or lost, and nothing written outside the tree.

The reader of results files (resume, reuse), names that become folders, sweep folders and counts,
W&B failures and OS errors on output paths. The analysis side (forged files, one run per seed,
the DOCS gate) is in tests/analysis/test_aggregate.py and tests/analysis/test_reproduction.py.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import open_dict, read_write

from clsuite.config.check import ConfigError, check_overrides, validate
from clsuite.config.paths import MAX_NAME, safe_name
from clsuite.run import io
from clsuite.run.experiment import run_experiment
from clsuite.run.results import read_run
from clsuite.sweep.grid import check_folders, expand_grid
from clsuite.sweep.index import INDEX_DIR, index_result, reindex
from clsuite.sweep.job import Job
from clsuite.sweep.locks import JobLock
from clsuite.sweep.summary import job_state, summarize
from tests.conftest import CONF_DIR, FAST, make_cfg

ROOT = Path(__file__).resolve().parents[2]
TINY = ("benchmark.n_tasks=2", "benchmark.synthetic.num_classes=4", "benchmark.train_per_class=20")


def _env(**extra: str) -> dict[str, str]:
    """This environment without the caller's CLSUITE_* and WANDB_MODE, the suite's src/ importable."""
    keep = {k: v for k, v in os.environ.items() if not k.startswith("CLSUITE_") and k != "WANDB_MODE"}
    return {**keep, "PYTHONPATH": str(ROOT / "src"), **extra}


def _as_a_user() -> list[str]:
    """A command prefix under which file permissions hold (root ignores them): root without
    CAP_DAC_OVERRIDE (setpriv); nothing for another user."""
    import shutil

    if os.geteuid() != 0:
        return []
    drop = "-dac_override,-dac_read_search"
    prefix = ["setpriv", f"--bounding-set={drop}", f"--inh-caps={drop}"]
    if not shutil.which("setpriv") or subprocess.run([*prefix, "true"], capture_output=True).returncode:
        pytest.skip("root that cannot drop CAP_DAC_OVERRIDE (setpriv): read-only folders cannot be made")
    return prefix


def _clsuite(cwd: Path, *args: str, user: bool = False) -> subprocess.CompletedProcess:
    """``python src/run.py <args>`` in ``cwd`` (``user``: file permissions hold, :func:`_as_a_user`)."""
    cmd = [*(_as_a_user() if user else []), sys.executable, str(ROOT / "src" / "run.py"), *args]
    return subprocess.run(cmd, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def one_run(tmp_path_factory) -> Path:
    """A results file written by the suite's own code (the format the reader must accept unchanged)."""
    out = tmp_path_factory.mktemp("run")
    run_experiment(make_cfg("method=er", *TINY), out)
    return out / io.RESULTS_FILE


def _sealed_copy(src: Path, dst: Path) -> Path:
    dst.mkdir(parents=True, exist_ok=True)
    (dst / io.RESULTS_FILE).write_text(src.read_text())
    return dst


# ----------------------------------------------------------------------------- the reader


def _resealed(one_run: Path, edit) -> str:
    """The reader's verdict on the suite's own results file, edited and sealed again: ok, or the reason."""
    from clsuite.run.identity import seal

    r = {k: v for k, v in json.loads(one_run.read_text()).items() if k != "digest"}
    edit(r)
    one_run.with_name("y.json").write_text(json.dumps(seal(r)))
    got = read_run(one_run.with_name("y.json"))
    return "ok" if got.ok else got.reason


def test_the_suites_own_results_pass_and_every_edit_is_caught(one_run):
    assert read_run(one_run).ok
    res = json.loads(one_run.read_text())
    cases = {
        "edited after it was written": lambda r: r["metrics"].update(acc=99.0),
        "unsealed": lambda r: r.pop("digest"),
    }
    for reason, edit in cases.items():
        r = json.loads(json.dumps(res))
        edit(r)
        one_run.with_name("x.json").write_text(json.dumps(r))
        assert read_run(one_run.with_name("x.json")).reason.startswith(reason)

    def resealed(edit) -> str:
        return _resealed(one_run, edit)

    # sealed again by someone, still not a run's file: the schema is checked
    assert resealed(lambda r: r["metrics"].update(acc=99.0)).startswith(
        "metrics.acc = 99.0 is not the value recomputed"
    )
    assert resealed(lambda r: r["R"][0].append(1.0)).startswith("'R' is not a T x T matrix")
    assert resealed(lambda r: r["R"][1].__setitem__(0, float("nan"))).startswith("'R' is not")
    assert resealed(lambda r: r.update(seed="0")).startswith("'seed' is not a whole number")
    assert resealed(lambda r: r.update(seed=7)).startswith("config.seed does not match")
    assert (
        resealed(lambda r: r["identity"].update(key="0" * 64)) == "identity.key is not the hash of the identity's parts"
    )
    assert resealed(lambda r: r["config"].update(lr=0.5)) == "identity.config is not the file's config (normalised)"
    for text, reason in (("[]", "not a JSON object (a list)"), ("3", "not a JSON object (a int)"), ("{", "not valid")):
        one_run.with_name("z.json").write_text(text)
        assert read_run(one_run.with_name("z.json")).reason.startswith(reason)
    assert read_run(one_run.with_name("none.json")).reason == "missing"


def test_the_task_il_matrix_is_checked_where_a_file_has_one_and_files_without_it_pass(one_run):
    """R_task_il (written by every run since the task-IL matrix) is R's shape and its metrics are
    recomputed from it; a file without it (the ones in docs/runs/, made before) passes as it did."""
    res = json.loads(one_run.read_text())
    assert len(res["R_task_il"]) == len(res["R"]) and res["metrics"]["acc_task_il"] >= res["metrics"]["acc"]

    def older(r):
        r.pop("R_task_il")
        for k in ("acc_task_il", "forget_task_il", "bwt_task_il"):
            r["metrics"].pop(k)

    assert _resealed(one_run, older) == "ok"
    why = _resealed(one_run, lambda r: r["R_task_il"][-1].__setitem__(0, 12.5))
    assert why.startswith("metrics.acc_task_il = ") and "is not the value recomputed from R_task_il" in why
    assert _resealed(one_run, lambda r: r["R_task_il"].pop()) == (
        "'R_task_il' is not a matrix of R's shape of accuracies in [0, 100]"
    )
    assert _resealed(one_run, lambda r: r["metrics"].pop("bwt_task_il")).startswith("metrics.bwt_task_il = None")
    assert _resealed(one_run, lambda r: r.update(R_task_il=None)).startswith("'R_task_il' is not a matrix")


def test_a_joint_run_one_final_row_and_nan_metrics_passes(tmp_path):
    run_experiment(make_cfg("method=joint", *TINY), tmp_path)
    got = read_run(tmp_path / io.RESULTS_FILE)
    assert got.ok and len(got.data["R"]) == 1 and got.data["metrics"]["bwt"] != got.data["metrics"]["bwt"]  # NaN


def test_config_only_relaxes_the_identity_never_the_seal_and_reuse_never_seals_unverified(one_run, tmp_path):
    """The example of issue 20: resume=config_only accepted a file whose digest was deleted; reuse
    into another experiment then gave it a fresh, valid seal."""
    mr = tmp_path / "multirun"
    cfg = make_cfg("method=er", *TINY, "resume=config_only", "experiment=table2")
    a = _sealed_copy(one_run, mr / "table2" / "a")
    res = json.loads((a / io.RESULTS_FILE).read_text())
    (a / io.RESULTS_FILE).write_text(json.dumps({k: v for k, v in res.items() if k != "digest"}))
    job = Job(cfg, a, sweep_dir=mr / "table2")
    job.register()  # not indexed: not sealed
    assert not (mr / INDEX_DIR).exists() and reindex(mr) == 0
    index_result(mr, a / io.RESULTS_FILE, res, job.hash, "table2")  # an index entry pointing at it anyway
    other = Job(make_cfg("method=er", *TINY, "resume=config_only", "experiment=memory"), mr / "memory" / "b")
    assert other.finished() is None and not other.results_path.exists()  # not reused, nothing sealed
    assert job.finished() is None and job.rerun_reasons == ["edited"]  # its own job reruns it
    assert (a / "results.stale-1.json").is_file() and not (a / io.RESULTS_FILE).exists()
    # a sealed file: config_only skips it, whatever the code
    _sealed_copy(one_run, a)
    assert Job(cfg, a, sweep_dir=mr / "table2").finished()[1] == "skipped"
    res, how = other.finished()
    assert how == "reused" and read_run(other.results_path).ok and res["config"]["experiment"] == "memory"


def test_json_that_is_not_an_object_never_crashes_a_job(tmp_path, one_run):
    d = tmp_path / "multirun" / "e" / "j"
    d.mkdir(parents=True)
    (d / io.LOCK_FILE).write_text("[]")  # no process holds it: taken
    lock = JobLock(d)
    assert lock.acquire() is None
    lock.release()
    (d / io.RESULTS_FILE).write_text("[]")
    (d / io.FAILED_FILE).write_text("[1]")
    job = Job(make_cfg("method=er", *TINY), d, sweep_dir=d.parent)
    assert job.finished() is None and job.rerun_reasons == ["malformed"]
    job.failed(RuntimeError("boom"))
    assert json.loads(job.failed_path.read_text())["attempt"] == 1


# ----------------------------------------------------------------------------- hostile files


def _finished_within(fn, seconds: float = 30.0) -> list:
    """``[fn()]`` when it returns within ``seconds``, else ``[]`` (a read that hangs)."""
    out: list = []
    t = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    t.start()
    t.join(seconds)
    return out


def _hostile(exp: Path) -> dict[str, str]:
    """Job folders of ``exp`` whose results.json is a FIFO, a link to /dev/zero, a folder, too large,
    or nested too deeply; -> the reason each must be left out with."""
    for job in ("fifo", "zero", "folder", "huge", "brackets", "deep"):
        (exp / job).mkdir(parents=True)
    os.mkfifo(exp / "fifo" / io.RESULTS_FILE)
    (exp / "zero" / io.RESULTS_FILE).symlink_to("/dev/zero")
    (exp / "folder" / io.RESULTS_FILE).mkdir()
    with open(exp / "huge" / io.RESULTS_FILE, "wb") as f:
        f.truncate(io.MAX_BYTES + 1)  # sparse: no disk used
    (exp / "brackets" / io.RESULTS_FILE).write_text("[" * 100_000)  # RecursionError in json.loads
    deep: dict = {}
    for _ in range(300):  # valid JSON that parses, nested beyond any file of the suite
        deep = {"x": deep}
    (exp / "deep" / io.RESULTS_FILE).write_text(json.dumps({"status": "finished", "digest": "0", "config": deep}))
    return {
        "fifo": "not a regular file (a FIFO)",
        "zero": "not a regular file (a character device)",
        "folder": "not a regular file (a folder)",
        "huge": f"too large ({io.MAX_BYTES + 1} bytes; the suite reads at most {io.MAX_BYTES})",
        "brackets": f"nested deeper than {io.MAX_DEPTH} levels (not a file of the suite)",
        "deep": f"nested deeper than {io.MAX_DEPTH} levels (not a file of the suite)",
    }


@pytest.fixture
def hostile_experiment(tmp_path, one_run):
    exp = tmp_path / "multirun" / "e"
    _sealed_copy(one_run, exp / "good")
    reasons = _hostile(exp)
    yield exp, reasons
    with contextlib.suppress(OSError):  # a reader still blocked on the FIFO (the old code): let it go
        os.close(os.open(exp / "fifo" / io.RESULTS_FILE, os.O_WRONLY | os.O_NONBLOCK))


def test_every_reader_leaves_out_hostile_files_without_hanging_or_crashing(hostile_experiment, tmp_path, capsys):
    """Issue 30: a FIFO named results.json hung `aggregate` and the start-up index of every sweep; a
    link to /dev/zero gave a MemoryError traceback; a deeply nested file a RecursionError."""
    from clsuite.analysis.report import main_aggregate

    exp, reasons = hostile_experiment
    for job, reason in reasons.items():
        got = _finished_within(lambda job=job: read_run(exp / job / io.RESULTS_FILE))
        assert got and not got[0].ok and got[0].reason == reason, (job, got)
        assert _finished_within(lambda job=job: job_state(exp / job)) == [
            ("failed", "left no results and no failure record (its files could not be written?)")
        ]
    assert _finished_within(lambda: reindex(tmp_path / "multirun")) == [1]  # the good one, once
    args = ["e", "--multirun-dir", str(tmp_path / "multirun"), "--out", str(tmp_path / "results")]
    assert _finished_within(lambda: main_aggregate(args)) == [0]
    left = sorted(line for line in capsys.readouterr().err.splitlines() if line.startswith("  left out: "))
    assert left == sorted(f"  left out: {job}: {reason}" for job, reason in reasons.items())
    assert _finished_within(lambda: main_aggregate([*args, "--strict"])) == [1]
    # the other files read back: a lock, a failure record, a grid, the sweep log, the index
    for name in (io.LOCK_FILE, io.FAILED_FILE, io.GRID_FILE, io.LOG_FILE):
        os.mkfifo(exp / "fifo" / name)
    assert _finished_within(lambda: io.read_object(exp / "fifo" / io.FAILED_FILE)) == [None]
    assert _finished_within(lambda: job_state(exp / "fifo")) == [  # a record all the same, not "none"
        ("failed", f"its {io.FAILED_FILE} is unreadable: not a regular file (a FIFO)")
    ]
    assert _finished_within(lambda: io.read_log(exp / "fifo")) == [[]]
    assert _finished_within(lambda: summarize(exp / "fifo", None, None))[0]["failed"] == 0


_SUMMARY_FAILS = """
import clsuite.sweep.callback as cb
def summarize(*args, **kwargs):
    raise RecursionError("maximum recursion depth exceeded")
cb.summarize = summarize
"""


def test_a_failing_sweep_callback_fails_the_sweep(tmp_path):
    """Issue 30: Hydra only warns when a callback raises, so a sweep whose summary crashed exited 0."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(_SUMMARY_FAILS)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(hook), str(ROOT / "src")])}
    cmd = [sys.executable, str(ROOT / "src" / "run.py"), "-m", *FAST, *TINY, "method=online", "trainer.threads=1", "reuse=false",
           f"hydra.sweep.dir={tmp_path / 's'}"]  # fmt: skip
    p = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    errors = [line for line in p.stderr.splitlines() if line.startswith("error:")]
    assert p.returncode == 1 and errors == [
        "error: the sweep's summary failed (RecursionError: maximum recursion depth exceeded); the sweep exits 1"
    ], p.stderr[-2000:]
    assert read_run(next((tmp_path / "s").glob(f"*/{io.RESULTS_FILE}"))).ok  # the job itself finished


# ----------------------------------------------------------------------------- names


TRAVERSALS = [
    ("experiment", "../../x"),
    ("benchmark.name", "x/../../../y"),
    ("method.name", "../.."),
    ("experiment", "/tmp/x"),
    ("experiment", ""),
    ("experiment", "a\nb"),
    ("experiment", ".index"),
    ("experiment", "x" * (MAX_NAME + 1)),
]


@pytest.mark.parametrize("key, value", TRAVERSALS)
def test_names_that_would_leave_the_tree_are_refused(key, value):
    cfg = make_cfg()  # (names are checked in the composed config: config.check_names, by validate)
    with open_dict(cfg):
        cfg.experiment = value if key == "experiment" else "ok"
        if key != "experiment":
            cfg[key.split(".")[0]].name = value
    with pytest.raises(ConfigError, match=rf"^{key} .* cannot be a folder name: "):
        validate(cfg)


def test_good_names_pass_and_aggregate_checks_its_argument(tmp_path, capsys):
    from clsuite.analysis.report import main_aggregate

    for name in ("table2", "my_sweep-2", "a..b", "M=100,tau=0.5"):
        assert safe_name(name) == name
    check_overrides(["experiment=e3,e4", "method.name=er"])
    from clsuite.analysis.wandb_sync import main as main_wandb

    for arg in ("../../x", ""):
        for main in (main_aggregate, main_wandb):
            assert main([arg, "--multirun-dir", str(tmp_path), "--out", str(tmp_path / "r")]) == 2
            err = capsys.readouterr().err.strip().splitlines()
            assert len(err) == 1 and err[0].startswith("error: experiment ") and "cannot be a folder name" in err[0]
    assert not (tmp_path / "r").exists()


def test_a_job_folder_name_is_one_folder_inside_the_sweep_s():
    """Issue 41: `-m 'logger.group=../../../../x'` made the job's folder four levels above the sweep's (its
    results, .hydra/ and wandb/ written there). The override dirname is escaped into one folder name."""
    from clsuite.analysis.load import job_overrides
    from clsuite.config.paths import dirname_text, job_dirname

    cfg = _sweep_cfg("logger=wandb", "logger.group=../../../../x", "seed=0,1")
    dirs = [j["dir"] for j in expand_grid(cfg)]
    assert dirs == [f"logger.group=..%2F..%2F..%2F..%2Fx,seed={s}" for s in (0, 1)]
    assert [job_overrides(d) for d in dirs] == ["logger.group=../../../../x"] * 2  # read back as typed
    for name, folder in {
        "a=1,b=2": "a=1,b=2",  # (every name without these characters keeps its folder)
        "a=x\\y": "a=x%5Cy",
        "a=50%": "a=50%25",
        "a=b\nc\x7f": "a=b%0Ac%7F",
        ".hidden=1": "%2Ehidden=1",
        "": "defaults",  # no override in the folder name: not the sweep's own folder
    }.items():
        assert job_dirname(name) == folder and (dirname_text(folder) == name or not name)
    for subdir in ("../elsewhere", "/tmp/x/${hydra.job.num}", "${hydra.job.num}/../.."):
        with pytest.raises(ConfigError, match=r"^hydra.sweep.subdir=.* leaves the sweep's folder: its jobs would"):
            check_folders(_sweep_cfg("seed=0", subdir=subdir), [{"overrides": ["seed=0"], "dir": None}])


def test_a_job_folder_that_is_a_link_is_refused_before_any_job(tmp_path):
    """A job folder linked out of the sweep's: the sweep wrote through it and counted it (2/2) while
    `aggregate`, which follows no link, said 1 missing."""
    cfg = _sweep_cfg("seed=0,1")
    with read_write(cfg), open_dict(cfg):
        cfg.hydra.sweep.dir = str(tmp_path / "multirun" / "e")
    jobs = expand_grid(cfg)
    (tmp_path / "outside").mkdir()
    (tmp_path / "multirun" / "e").mkdir(parents=True)
    check_folders(cfg, jobs)
    (tmp_path / "multirun" / "e" / jobs[1]["dir"]).symlink_to(tmp_path / "outside")
    with pytest.raises(ConfigError) as e:
        check_folders(cfg, jobs)
    assert str(e.value) == (
        f"the job folder {tmp_path / 'multirun' / 'e' / jobs[1]['dir']} is a link (to {tmp_path / 'outside'}): a sweep "
        "writes only inside its folder, where its grid and `clsuite aggregate` count the jobs; move that folder back "
        "or remove the link"
    )


def test_a_sweep_writes_nothing_outside_its_folder(tmp_path):
    """Issue 41, through the command line: the sweep said 1/1, `aggregate --strict` then 0/1."""
    p = _clsuite(tmp_path, "-m", *FAST, *TINY, "method=online", "logger=wandb", "logger.mode=disabled",
                 "logger.group=../../../../x", "experiment=e")  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    assert sorted(os.listdir(tmp_path)) == ["multirun"]
    job = "benchmark.n_tasks=2,benchmark.synthetic.num_classes=4,benchmark.train_per_class=20,benchmark=synthetic,"
    job += "logger.group=..%2F..%2F..%2F..%2Fx,method=online"
    assert sorted(os.listdir(tmp_path / "multirun" / "e")) == [job, io.GRID_FILE, "multirun.yaml", io.LOG_FILE]
    assert read_run(tmp_path / "multirun" / "e" / job / io.RESULTS_FILE).ok
    p = _clsuite(tmp_path, "aggregate", "e", "--strict")
    assert p.returncode == 0 and p.stdout.startswith("e: 1 runs (1/1 of the grid), 0 failed, 0 missing"), p.stderr


# ----------------------------------------------------------------------------- sweep folders and counts


def _sweep_cfg(*task: str, subdir: str | None = None):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=FAST, return_hydra_config=True)
    with read_write(cfg), open_dict(cfg):
        cfg.hydra.overrides.task = list(task)
        if subdir is not None:
            cfg.hydra.sweep.subdir = subdir
    return cfg


def test_grid_refuses_a_swept_experiment_and_shared_folders():
    for task, subdir, msg in (
        (("experiment=e3,e4", "seed=0,1"), None, r"^experiment is swept \(e3,e4\)"),
        (("seed=0,1",), "fixed", r"^hydra.sweep.subdir='fixed' is the same for all 2 jobs"),
        (("seed=0", "trainer.threads=1,2"), None, r"^jobs .* would share the folder 'seed=0'"),
    ):
        cfg = _sweep_cfg(*task, subdir=subdir)
        with pytest.raises(ConfigError, match=msg):
            check_folders(cfg, expand_grid(cfg))
    ok = _sweep_cfg("seed=0,1", subdir="${hydra.job.num}")
    check_folders(ok, expand_grid(ok))


def test_the_summary_counts_jobs_from_their_files(tmp_path, one_run):
    """A job that left neither results nor a failure record (its log line and record lost to a full
    disk) fails the sweep; an edited results file is not a finished job."""
    sdir = tmp_path / "multirun" / "e"
    grid = [{"overrides": [], "dir": d} for d in ("done", "edited", "failed", "lost")]
    _sealed_copy(one_run, sdir / "done")
    res = json.loads(one_run.read_text())
    res["metrics"]["acc"] = 99.0
    (_sealed_copy(one_run, sdir / "edited") / io.RESULTS_FILE).write_text(json.dumps(res))
    (sdir / "failed").mkdir()
    (sdir / "failed" / io.FAILED_FILE).write_text(json.dumps({"error": "RuntimeError: boom"}))
    (sdir / "lost").mkdir()
    s = summarize(sdir, "id", grid)  # no sweep log at all
    assert (s["finished_total"], s["failed"], s["expected"]) == (1, 3, 4)
    assert any(f.startswith("lost: left no results and no failure record") for f in s["failed_jobs"])


def test_an_unwritable_sweep_log_is_one_warning_and_no_false_progress(tmp_path, capsys):
    """Issue 30: an unwritable sweep_log.jsonl made the progress line say "0/3 done" with no warning. One
    warning per Sweep object (one per sweep in a process); a Sweep of its own warns again."""
    from clsuite.sweep.job import Sweep

    sdir = tmp_path / "multirun" / "e"
    sweep = Sweep(sdir, "s1")
    (sdir / io.LOG_FILE).mkdir(parents=True)  # a folder where the log should be: every append fails
    grid = [{"overrides": [], "dir": d} for d in ("a", "b", "c")]
    grid_file = {"sweep_id": "s1", "created": "2026-01-01T00:00:00", "n_jobs": 3, "jobs": grid}
    (sdir / io.GRID_FILE).write_text(json.dumps(grid_file))  # (a progress line would say "0/3 done")
    for d in ("a", "b"):
        Job(make_cfg("method=er", *TINY), sdir / d, sweep=sweep).log("ran")
    err = capsys.readouterr().err.strip().splitlines()
    warning = (
        f"warning: cannot write {sdir / io.LOG_FILE} (Is a directory: {sdir / io.LOG_FILE}): no progress lines "
        "and no rerun reasons; the summary counts the jobs from their own files"
    )
    assert err == [warning] and sweep.log_lost
    Job(make_cfg("method=er", *TINY), sdir / "c", sweep=Sweep(sdir, "s1")).log("ran")
    assert capsys.readouterr().err.strip().splitlines() == [warning]
    assert summarize(sdir, "s1", grid)["log_lost"]


def test_cli_refusals_and_an_empty_sweep_change_nothing(tmp_path):
    """Through the real command line (Hydra's callbacks run): one error line, exit 2, nothing written."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}

    def cli(*args):
        multirun = ["-m"] if args[0] == "-m" else []
        args = ["reuse=false", *args[len(multirun) :]]
        p = subprocess.run([sys.executable, str(ROOT / "src" / "run.py"), *multirun, *FAST, *TINY, *args], cwd=tmp_path,
                           capture_output=True, text=True, env=env, timeout=300)  # fmt: skip
        return p.returncode, p.stderr.strip().splitlines()

    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / io.RESULTS_FILE).write_text("{}")
    rc, err = cli(f"hydra.run.dir={taken}")
    assert rc == 2 and err[-1].startswith("error: hydra.run.dir") and "already holds another run's results" in err[-1]
    assert (taken / io.RESULTS_FILE).read_text() == "{}" and sorted(os.listdir(taken)) == [io.RESULTS_FILE]
    (tmp_path / "afile").write_text("x")
    rc, err = cli(f"hydra.run.dir={tmp_path / 'afile' / 'run'}")  # a folder that cannot be made: one line, exit 1
    assert rc == 1 and err == [f"error: Not a directory: {tmp_path / 'afile' / 'run'}; nothing run"]
    rc, err = cli("experiment=../../x")
    assert rc == 2 and len(err) == 1 and err[0].startswith("error: experiment '../../x' cannot be a folder name")
    (tmp_path / "multirun" / "e").mkdir(parents=True)
    (tmp_path / "multirun" / "e" / io.GRID_FILE).write_text('{"jobs": []}')
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    rc, err = cli("-m", "experiment=e", "seed=range(0,0)")
    assert rc == 0 and "no jobs (an empty sweep)" in err[-1]
    rc, err = cli("-m", "experiment=e3,e4", "seed=0")
    assert rc == 2 and err[-1].startswith("error: experiment is swept (e3,e4)")
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before  # nothing written anywhere
    assert (tmp_path / "multirun" / "e" / io.GRID_FILE).read_text() == '{"jobs": []}'


# ----------------------------------------------------------------------------- W&B and OS errors


def test_a_failing_wandb_costs_no_result(tmp_path, wandb_env, monkeypatch, capsys):
    """A file named ``wandb`` in the run's folder, or online without an API key (W&B cannot start):
    one warning, CSV instead, exit 0 and the results file; with logger.required=true: one error
    line before training."""
    from clsuite.cli import run_single

    out = tmp_path / "run"
    out.mkdir()
    (out / "wandb").write_text("taken")
    acc = run_single(make_cfg("method=er", *TINY, "logger=wandb"), str(out))
    err = capsys.readouterr().err
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and warnings[0].startswith("warning: W&B start failed")
    assert (
        read_run(out / io.RESULTS_FILE).ok and acc == json.loads((out / io.RESULTS_FILE).read_text())["metrics"]["acc"]
    )
    assert (out / "csv" / "metrics.csv").is_file()  # logged to CSV instead
    # online without an API key (no network needed: W&B refuses at once)
    monkeypatch.setenv("WANDB_MODE", "online")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    run_single(make_cfg("method=er", *TINY, "logger=wandb"), str(tmp_path / "online"))
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and warnings[0].startswith("warning: W&B start failed (UsageError: No API key")
    assert read_run(tmp_path / "online" / io.RESULTS_FILE).ok
    monkeypatch.setenv("WANDB_MODE", "offline")
    req = tmp_path / "required"
    req.mkdir()
    (req / "wandb").write_text("taken")
    with pytest.raises(SystemExit) as e:
        run_single(make_cfg("method=er", *TINY, "logger=wandb", "logger.required=true"), str(req))
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and err[-1].startswith("error: W&B is required (logger.required=true) but cannot start")
    assert sorted(os.listdir(req)) == ["wandb"]  # nothing trained, nothing written


def test_a_wandb_write_failure_mid_run_costs_no_result(tmp_path, wandb_env, monkeypatch, capsys):
    import wandb.sdk.wandb_run as wr

    from clsuite.cli import run_single

    def broken(self, *a, **k):
        raise PermissionError(errno.EACCES, "Permission denied", "/cache/wandb")

    monkeypatch.setattr(wr.Run, "log", broken)
    out = tmp_path / "run"
    run_single(make_cfg("method=er", *TINY, "logger=wandb"), str(out))
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and warnings[0].startswith("warning: W&B write failed (PermissionError")
    assert read_run(out / io.RESULTS_FILE).ok and not (out / "wandb" / "mirror.json").exists()


def test_a_scratch_folder_is_in_memory_unless_tmpdir_says_where_or_memory_lacks_room(tmp_path, monkeypatch):
    """The records a report is rebuilt from are thousands of small files, and on a disk mounted with
    ``discard`` deleting them took longer than the report: they go to the memory's tmpfs, unless ``TMPDIR``
    names a folder, the tmpfs has less than ``need_bytes`` free, or there is none."""
    mem = tmp_path / "shm"
    mem.mkdir()
    monkeypatch.setattr(io, "MEMORY_TMP", mem)
    monkeypatch.delenv("TMPDIR", raising=False)
    with io.scratch_dir("clsuite-x-") as d:
        assert Path(d).parent == mem and Path(d).name.startswith("clsuite-x-")
        (Path(d) / "a").write_text("x")
    assert list(mem.iterdir()) == []  # deleted with its files
    with io.scratch_dir("clsuite-x-", need_bytes=1 << 62) as d:
        assert Path(d).parent != mem
    monkeypatch.setattr(io, "MEMORY_TMP", tmp_path / "none")
    with io.scratch_dir("clsuite-x-") as d:
        assert Path(d).is_dir()
    monkeypatch.setattr(io, "MEMORY_TMP", mem)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    with io.scratch_dir("clsuite-x-") as d:
        assert Path(d).parent != mem


def test_os_errors_on_output_paths_are_one_line_and_no_partial_file(tmp_path, monkeypatch, capsys):
    """Tests run as root (chmod stops nothing): a full disk is simulated at fsync, a read-only or
    impossible folder by a parent that is a file."""
    from clsuite.cli import run_single

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    out = tmp_path / "run"
    monkeypatch.setattr(io.os, "fsync", full)
    with pytest.raises(SystemExit) as e:
        run_single(make_cfg("method=er", *TINY), str(out))
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 1 and len(err) == 1
    assert err[0] == f"error: No space left on device: {out / io.RESULTS_FILE}; no results written"
    assert not [p for p in out.iterdir() if p.name.startswith((".results", "results"))]  # no partial file
    # in a sweep: the job is recorded failed with that reason, the record names the path
    sdir = tmp_path / "multirun" / "e"
    job = Job(make_cfg("method=er", *TINY), sdir / "j", sweep_dir=sdir)
    with pytest.raises(OSError) as exc:
        run_experiment(make_cfg("method=er", *TINY), job.out_dir)
    monkeypatch.undo()
    line = job.failed(exc.value)
    assert line == f"OSError: No space left on device: {job.results_path}"
    assert json.loads(job.failed_path.read_text())["error"] == line
    assert summarize(sdir, None, [{"overrides": [], "dir": "j"}])["failed"] == 1
    # a parent that is a file: the folder cannot be made
    (tmp_path / "afile").write_text("x")
    with pytest.raises(OSError) as exc:
        io.write_json_atomic(tmp_path / "afile" / "sub" / io.RESULTS_FILE, {})
    assert io.os_error_line(exc.value) == f"Not a directory: {tmp_path / 'afile' / 'sub' / io.RESULTS_FILE}"


def test_a_sweep_rerun_in_read_only_job_folders_goes_on_and_loses_no_run(tmp_path):
    """Issue 41: a rerun whose job folders were read-only ended in a PermissionError traceback and ran no
    further job. A folder that cannot be written (its lock, or Hydra's run.log) is that job's alone: its
    finished run stands (skipped), else one `error:` line; the next job runs."""
    sweep_args = ["-m", *FAST, *TINY, "method=online", "experiment=e", "trainer.threads=1"]
    assert _clsuite(tmp_path, *sweep_args, "seed=0,1").returncode == 0
    sdir = tmp_path / "multirun" / "e"
    d0, d1 = (f"{','.join(sorted(['benchmark=synthetic', *TINY]))},method=online,seed={s}" for s in (0, 1))
    (sdir / d1 / io.RESULTS_FILE).unlink()  # its run is to be redone, in a folder that cannot be written
    kept = (sdir / d0 / io.RESULTS_FILE).read_bytes()
    (sdir / d0).chmod(0o555)  # the folder only: its lock cannot be taken
    for path in [sdir / d1, *(sdir / d1).rglob("*")]:  # all of it: Hydra's run.log, .hydra/ cannot be written
        path.chmod(path.stat().st_mode & ~0o222)
    try:
        p = _clsuite(tmp_path, *sweep_args, "seed=0,1,2", user=True)
    finally:
        for path in [sdir / d0, sdir / d1, *(sdir / d1).rglob("*")]:
            path.chmod(path.stat().st_mode | 0o200)
    err = p.stderr.splitlines()
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr[-3000:]
    assert [line for line in err if line.startswith("error:")] == [
        f"error: {d1}: PermissionError: Permission denied: {sdir / d1 / 'run.log'} (no {io.FAILED_FILE}: "
        f"PermissionError: Permission denied: {sdir / d1 / io.FAILED_FILE})"
    ]
    assert f"skipped {d0}: results exist (Acc=50.00); its folder cannot be written (Permission denied: " \
           f"{sdir / d0 / io.LOCK_FILE})" in p.stdout  # fmt: skip
    assert (sdir / d0 / io.RESULTS_FILE).read_bytes() == kept
    assert read_run(sdir / d1.replace("seed=1", "seed=2") / io.RESULTS_FILE).ok  # the next job ran
    summary = err.index(next(line for line in err if line.startswith("sweep e: 1 ran, 1 skipped (results match), ")))
    assert err[summary].endswith("0 interrupted, 1 failed; 2/3 of the grid have results")
    assert (
        err[summary + 1] == f"  failed: {d1}: left no results and no failure record (its files could not be written?)"
    )


def test_a_sweep_whose_jobs_fail_over_older_results_fails(tmp_path):
    """Issue "The last frictions of a first day", item 1: a rerun (resume=off) whose jobs both failed
    ended "0 failed; 2/2 of the grid have results", exit 0, as their folders held older results. Now
    the summary counts the jobs that failed in this sweep and the sweep exits 1."""
    sweep_args = ["-m", *FAST, *TINY, "method=online", "experiment=e", "trainer.threads=1", "seed=0,1"]
    assert _clsuite(tmp_path, *sweep_args).returncode == 0
    sdir = tmp_path / "multirun" / "e"
    dirs = [f"{','.join(sorted(['benchmark=synthetic', *TINY]))},method=online,seed={s}" for s in (0, 1)]
    for d in dirs:
        (sdir / d / "tensorboard").write_text("x")  # a file where the logger makes its folder: the job fails
    p = _clsuite(tmp_path, *sweep_args, "logger=tensorboard", "resume=off")
    err = p.stderr.splitlines()
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr[-3000:]
    assert len([line for line in err if line.startswith("error:")]) == 2
    assert (
        "sweep e: 0 ran, 0 skipped (results match), 0 reused (same identity in another experiment), 0 busy "
        "(running elsewhere), 0 interrupted, 2 failed; 2/2 of the grid have results (2 of them from earlier "
        "sweeps: their jobs failed in this one)"
    ) in err
    gone = "FileExistsError: File exists: {}"
    assert [line for line in err if line.startswith("  failed: ")] == [
        f"  failed: {d}: {gone.format(sdir / d / 'tensorboard')}" for d in dirs
    ]
    assert all(read_run(sdir / d / io.RESULTS_FILE).ok for d in dirs)  # the older results stand


def _no_space(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def test_aggregate_and_report_into_a_folder_that_cannot_be_written(tmp_path, one_run, monkeypatch, capsys):
    """Issue 41: `aggregate` / `report` into a read-only results folder ended in a traceback. Now one
    `error:` line naming the folder, exit 1 (an output path: section 7), and nothing written."""
    from clsuite.analysis.choices import CHOICES
    from clsuite.analysis.choices import main as choices_main
    from clsuite.analysis.report import main_aggregate, main_report

    _sealed_copy(one_run, tmp_path / "multirun" / "e" / "j")
    (tmp_path / "afile").write_text("x")
    for out, why in ((tmp_path / "afile", "Not a directory"), (tmp_path / "results", "No space left on device")):
        if why.startswith("No space"):
            monkeypatch.setattr(io.os, "fsync", _no_space)
        assert main_aggregate(["e", "--multirun-dir", str(tmp_path / "multirun"), "--out", str(out)]) == 1
        assert capsys.readouterr().err.splitlines() == [f"error: {why}: {out / 'e'}; the tables of e are not written"]
        assert main_report(["--multirun-dir", str(tmp_path / "multirun"), "--results-dir", str(out)]) == 1
        assert capsys.readouterr().err.splitlines() == [f"error: {why}: {out / 'report' / 'figures'}; the report is not written"]  # fmt: skip
        assert not (tmp_path / "results").exists()  # (the folders it made, removed again)
    choice = tmp_path / "choices" / CHOICES[0].experiment
    _sealed_copy(one_run, choice / "j")
    assert choices_main(["--multirun-dir", str(choice.parent), "--out", str(tmp_path / "c")]) == 1  # (a full disk)
    assert capsys.readouterr().err.splitlines() == [
        f"error: No space left on device: {tmp_path / 'c' / 'choices.md'}; nothing written"
    ]
    assert os.listdir(tmp_path / "c") == []  # no partial file
    monkeypatch.undo()
    (tmp_path / "results").mkdir(mode=0o555)  # read-only, through the command line
    for args, line in (
        (["aggregate", "e"], "error: Permission denied: results/e; the tables of e are not written"),
        (["report"], f"error: Permission denied: {tmp_path / 'results' / 'report' / 'figures'}; the report is not written"),
    ):  # fmt: skip
        p = _clsuite(tmp_path, *args, user=True)
        assert p.returncode == 1 and p.stderr.splitlines() == [line], p.stderr[-2000:]
    assert os.listdir(tmp_path / "results") == []


# Loaded into the process through PYTHONPATH: a full disk, where every write fails (Hydra's own
# writes of .hydra/*.yaml too).
_FULL_DISK = """
import errno, os
def full(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")
os.fsync = full
import hydra.core.utils
hydra.core.utils._save_config = full
"""


def test_a_full_disk_under_the_run_folder_is_one_line(tmp_path):
    """Issue 30: a full disk under hydra.run.dir gave Hydra's OSError traceback. Now: one line, exit 1,
    no folder left."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(_FULL_DISK)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(hook), str(ROOT / "src")])}
    run_dir = tmp_path / "out" / "run"
    p = subprocess.run([sys.executable, str(ROOT / "src" / "run.py"), *FAST, *TINY, f"hydra.run.dir={run_dir}"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert p.returncode == 1 and p.stderr.strip().splitlines() == [
        f"error: No space left on device: {run_dir}; nothing run"
    ], p.stderr[-2000:]
    assert not run_dir.exists()


@pytest.mark.parametrize(
    "name", ["table2", "memory", "first_task", "tau", "imbalance", "ablation", "cifar100", "ablation_cifar100"]
)
def test_every_paper_sweep_gives_each_job_its_own_folder(name):
    from tests.lab.test_sweeps import compose_sweep

    cfg = compose_sweep(name)
    jobs = expand_grid(cfg)
    check_folders(cfg, jobs)  # no ConfigError
    assert len({j["dir"] for j in jobs}) == len(jobs) > 1
