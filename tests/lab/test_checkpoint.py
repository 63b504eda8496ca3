"""Task-end checkpoints and exact resume (clsuite.run.checkpoint, docs/GUIDE.md, "Checkpoints"), and the
per-slot fields a policy declares on the memory (clsuite.core.memory.buffer.Memory.declare)."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import clsuite.run.checkpoint as ck
import clsuite.run.experiment as ex
from clsuite.config.check import ConfigError, validate
from clsuite.core.memory.buffer import Memory
from clsuite.core.memory.reservoir import Reservoir
from clsuite.core.methods.base import Plugin
from clsuite.run.experiment import run_experiment
from tests.conftest import expected_identity, identity_of, make_cfg

ROOT = Path(__file__).resolve().parents[2]
METHODS = sorted(p.stem for p in (ROOT / "conf" / "method").glob("*.yaml"))
SAME = ("R", "R_task_il", "b", "metrics", "per_class", "steps_per_task")  # what a resumed run must reproduce exactly


class Killed(BaseException):
    """Stands for a SIGKILL right after a checkpoint was written (nothing after it runs)."""


def killed_after(monkeypatch, n_saves: int):
    """Patch the checkpoint callback so that the run dies right after its ``n_saves``-th checkpoint
    (before Lightning deletes the one it replaces)."""
    orig, count = ck.TaskCheckpoint._save_checkpoint, []

    def save(self, trainer, filepath):
        orig(self, trainer, filepath)
        count.append(filepath)
        if len(count) == n_saves:
            raise Killed(Path(filepath))

    monkeypatch.setattr(ck.TaskCheckpoint, "_save_checkpoint", save)
    return orig


def kill_and_resume(monkeypatch, tmp_path, *overrides, n_saves=1, between=None):
    """(uninterrupted results, resumed results, checkpoint folder) of the same config."""
    full = run_experiment(make_cfg(*overrides), tmp_path / "full", checkpoint_dir=tmp_path / "ck-full")
    store = tmp_path / "ck"
    orig = killed_after(monkeypatch, n_saves)
    with pytest.raises(Killed):
        run_experiment(make_cfg(*overrides), tmp_path / "killed", checkpoint_dir=store)
    monkeypatch.setattr(ck.TaskCheckpoint, "_save_checkpoint", orig)
    assert not (tmp_path / "killed" / "results.json").exists()
    if between is not None:
        between(store)
    resumed = run_experiment(make_cfg(*overrides), tmp_path / "resumed", checkpoint_dir=store)
    return full, resumed, store


@pytest.mark.exact
@pytest.mark.parametrize("method", METHODS)
def test_a_run_killed_after_task_1_of_3_resumes_to_the_same_result(monkeypatch, tmp_path, method):
    if method == "joint":  # one pass over the union of the tasks: no task end to resume from
        res = run_experiment(make_cfg("method=joint", "checkpoint=task_end"), tmp_path / "j", checkpoint_dir=tmp_path)
        assert res["resumed_at_task"] is None and not list(tmp_path.glob("*.ckpt"))
        return
    full, resumed, store = kill_and_resume(monkeypatch, tmp_path, f"method={method}", "checkpoint=task_end")
    assert resumed["resumed_at_task"] == 2 and full["resumed_at_task"] is None
    for key in SAME:
        assert resumed[key] == full[key], key
    assert resumed["identity"]["key"] == full["identity"]["key"]
    assert not store.exists()  # deleted once the results file is written


def test_a_resumed_run_counts_the_times_of_its_earlier_processes():
    """wall_time_s and cpu_time_s are over all of a run's processes: loading a checkpoint takes its times as
    the part before this process (a resumed run that counted only its own would report less)."""
    saver = ck.TaskCheckpoint("k", t0=ck.time.perf_counter(), cpu0=ck.time.process_time())
    saver.on_load_checkpoint(None, None, {"clsuite": {"wall_time_s": 5.0, "cpu_time_s": 700.0, "rng": ck.rng_states()}})
    assert 700.0 <= saver.cpu_time_s < 710.0 and 5.0 <= saver.wall_time_s < 15.0


def test_resume_without_the_random_generators_differs(monkeypatch, tmp_path):
    """The comparison above can fail: leaving the generators unrestored changes R (replay draws)."""
    monkeypatch.setattr(ck, "set_rng_states", lambda state: None)
    full, resumed, _ = kill_and_resume(monkeypatch, tmp_path, "method=er", "checkpoint=task_end", "reading=paper_text")
    assert resumed["resumed_at_task"] == 2 and resumed["R"][1:] != full["R"][1:]
    assert resumed["R"][0] == full["R"][0] and resumed["b"] == full["b"]  # measured before the kill


class ReadsTheNetOnLoad(Plugin):
    """A plugin from outside src/ whose ``load_state_dict`` reads the learner's network (iCaRL's copies it)."""

    def __init__(self):
        self.net_on_load = None

    def load_state_dict(self, state: dict, learner=None) -> None:
        self.net_on_load = {k: v.clone() for k, v in learner.net.state_dict().items()}


def test_a_plugin_restores_its_state_from_the_restored_network(monkeypatch, tmp_path):
    """Lightning calls the learner's on_load_checkpoint before it loads the weights: the learner loads
    them first, so a plugin's load_state_dict reads the checkpoint's network, not a fresh one."""
    build, learners = ex.build, []

    def with_plugin(cfg, source=None):
        dm, learner, device = build(cfg, source)
        learner.plugin = ReadsTheNetOnLoad()
        learners.append(learner)
        return dm, learner, device

    monkeypatch.setattr(ex, "build", with_plugin)
    orig = killed_after(monkeypatch, 1)
    cfg = make_cfg("method=er", "checkpoint=task_end")
    with pytest.raises(Killed) as e:
        run_experiment(cfg, tmp_path / "killed", checkpoint_dir=tmp_path / "ck")
    saved = torch.load(e.value.args[0], weights_only=True)["state_dict"]
    monkeypatch.setattr(ck.TaskCheckpoint, "_save_checkpoint", orig)
    assert run_experiment(cfg, tmp_path / "resumed", checkpoint_dir=tmp_path / "ck")["resumed_at_task"] == 2
    got = learners[-1].plugin.net_on_load
    assert got.keys() == {k.removeprefix("net.") for k in saved} and all(
        torch.equal(v, saved[f"net.{k}"]) for k, v in got.items()
    )


def test_tasks_are_numbered_1_to_T_in_the_file_the_message_and_the_field(monkeypatch, tmp_path, capsys):
    """Killed after task 2 of 3: the file is after-task-0002.ckpt, the run says it resumes at task 3
    with tasks 1-2 done, and the results record resumed_at_task 3, the first task it trained."""
    seen = []
    full, resumed, store = kill_and_resume(
        monkeypatch, tmp_path, "method=er", "checkpoint=task_end", n_saves=2,
        between=lambda store: seen.extend(sorted(p.name for p in store.glob("*.ckpt"))),
    )  # fmt: skip
    assert seen == ["after-task-0001.ckpt", "after-task-0002.ckpt"]
    err = capsys.readouterr().err
    assert f"resuming at task 3 of 3 (tasks 1-2 done) from {store / 'after-task-0002.ckpt'}" in err
    assert resumed["resumed_at_task"] == 3 and all(resumed[k] == full[k] for k in SAME)


def test_the_checkpoint_holds_every_piece_of_the_run(monkeypatch, tmp_path):
    killed_after(monkeypatch, 1)
    with pytest.raises(Killed) as e:
        run_experiment(make_cfg("method=hal", "checkpoint=task_end"), tmp_path / "r", checkpoint_dir=tmp_path / "ck")
    path = e.value.args[0]
    assert path.name == "after-task-0001.ckpt" and ck.digest_path(path).is_file()
    c = torch.load(path, weights_only=True)  # Lightning's dict, plain types: loadable without pickled code
    assert {"state_dict", "optimizer_states", "loops", "callbacks", "continual", "clsuite"} <= set(c)
    assert c["loops"]["fit_loop"]["epoch_progress"]["current"]["completed"] == 1
    rows = c["callbacks"]["AccuracyMatrix"]
    assert len(rows["rows"]) == len(rows["rows_task_il"]) == 1 and len(rows["b"]) == 3 and rows["train_time_s"] > 0
    cont = c["continual"]
    assert cont["learner"]["seen_tasks"] == 1 and cont["memory"]["size"] > 0
    assert set(cont["memory"]["fields"]) == {"score", "logits", "arrival"}  # HAL's ring declares arrival
    assert len(cont["plugin"]["anchors"]) == 2 and cont["plugin"]["phi"].shape[0] == 6  # one anchor per class
    meta = c["clsuite"]
    assert meta["next_task"] == 1 and set(meta["rng"]) == {"torch", "torch.cuda", "numpy", "python"}
    assert meta["cpu_time_s"] > 0 and meta["wall_time_s"] > 0  # the run's times so far, carried to its resumption
    (saver,) = (v for k, v in c["callbacks"].items() if k.startswith("TaskCheckpoint"))  # ModelCheckpoint's state
    assert saver["best_k_models"] == {str(path): 1} and saver["dirpath"] == str(path.parent)
    assert meta["identity"] == identity_of(make_cfg("method=hal"), "cpu")["key"]  # checkpoint keys ignored


@pytest.mark.parametrize("damage", ["truncated", "no digest", "bit flip"])
def test_a_damaged_newest_checkpoint_is_ignored_with_a_warning(monkeypatch, tmp_path, capsys, damage):
    def spoil(store):
        newest = store / "after-task-0002.ckpt"
        assert newest.is_file() and (store / "after-task-0001.ckpt").is_file()
        data = newest.read_bytes()
        if damage == "truncated":
            newest.write_bytes(data[: len(data) // 2])
        elif damage == "no digest":
            ck.digest_path(newest).unlink()
        else:
            newest.write_bytes(data[:-100] + bytes([data[-100] ^ 1]) + data[-99:])

    full, resumed, _ = kill_and_resume(
        monkeypatch, tmp_path, "method=er", "checkpoint=task_end", n_saves=2, between=spoil
    )
    assert "warning: ignoring checkpoint" in capsys.readouterr().err
    assert resumed["resumed_at_task"] == 2  # the older, valid one
    assert all(resumed[k] == full[k] for k in SAME)


def test_a_fifo_in_the_store_is_passed_over_without_blocking(tmp_path, capsys):
    """Issue 30: every reader opens only regular files; a FIFO named like a checkpoint blocked the run."""
    import threading

    os.mkfifo(tmp_path / "after-task-0002.ckpt")
    (tmp_path / "after-task-0002.ckpt.sha256").write_text("0" * 64)
    got: list = []
    t = threading.Thread(target=lambda: got.append(ck.CheckpointStore(tmp_path, "k").latest()), daemon=True)
    t.start()
    t.join(30)
    if t.is_alive():  # (the old code: release the blocked open before failing)
        os.close(os.open(tmp_path / "after-task-0002.ckpt", os.O_WRONLY | os.O_NONBLOCK))
    assert got == [None]
    assert capsys.readouterr().err.strip() == (
        f"warning: ignoring checkpoint {tmp_path / 'after-task-0002.ckpt'}: unreadable or without its digest "
        "(not a regular file (a FIFO))"
    )


def test_a_checkpoint_of_another_format_is_passed_over(tmp_path, capsys):
    """Format 1 (before Lightning collected the generators) holds them under other names: never resumed from."""
    io = ck.AtomicCheckpointIO()
    for k, fmt in [(1, ck.FORMAT), (2, 1)]:
        io.save_checkpoint(
            {"clsuite": {"format": fmt, "identity": "k", "next_task": k}}, tmp_path / f"after-task-000{k}.ckpt"
        )
    assert ck.CheckpointStore(tmp_path, "k").latest()[1]["next_task"] == 1
    assert capsys.readouterr().err.strip() == (
        f"warning: ignoring checkpoint {tmp_path / 'after-task-0002.ckpt'}: written by other code (checkpoint "
        f"format 1, this code's is {ck.FORMAT})"
    )


def test_a_checkpoint_of_another_identity_is_never_loaded(monkeypatch, tmp_path, capsys):
    def swap(store):  # the store now holds a checkpoint of seed 1 only
        for p in store.iterdir():
            p.unlink()
        killed_after(monkeypatch, 1)
        with pytest.raises(Killed):
            run_experiment(
                make_cfg("method=er", "checkpoint=task_end", "seed=1"), tmp_path / "s1", checkpoint_dir=store
            )
        monkeypatch.setattr(ck.TaskCheckpoint, "_save_checkpoint", orig)

    orig = ck.TaskCheckpoint._save_checkpoint
    full, resumed, _ = kill_and_resume(monkeypatch, tmp_path, "method=er", "checkpoint=task_end", between=swap)
    assert "made by another run identity" in capsys.readouterr().err
    assert resumed["resumed_at_task"] is None and all(resumed[k] == full[k] for k in SAME)


@pytest.mark.parametrize("store", ["a file", "/proc"])
def test_a_checkpoint_that_cannot_be_written_costs_no_result(monkeypatch, tmp_path, capsys, store):
    """Issue 30: a store that is a file (or under /proc) ended the run with `error: ...task-0001.ckpt;
    no results written`, exit 1. Now: one warning, the run goes on, its results are written."""
    from clsuite.cli import run_single

    where = tmp_path / "afile" if store == "a file" else Path("/proc/clsuite-test")
    if store == "a file":
        where.write_text("x")
    out = tmp_path / "run"
    acc = run_single(make_cfg("method=er", "checkpoint=task_end", f"checkpoint_dir={where}"), str(out))  # no SystemExit
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith(("warning:", "error:"))]
    assert len(warnings) == 1 and warnings[0].startswith("warning: cannot write checkpoints ("), warnings
    assert warnings[0].endswith("the run goes on without checkpoints and writes its results")
    res = json.loads((out / "results.json").read_text())
    assert res["metrics"]["acc"] == acc and res["resumed_at_task"] is None


def test_an_unclearable_store_costs_no_result(monkeypatch, tmp_path, capsys):
    """Issue 30: with checkpoint=off and a store whose files cannot be deleted, the run wrote its
    sealed results and then exited 1 saying "no results written". Now: a warning, the results stand."""
    from clsuite.cli import run_single
    from clsuite.run.results import read_run

    store = f"checkpoint_dir={tmp_path / 'store'}"
    cfg = make_cfg("method=er", "checkpoint=task_end", store)
    folder = ck.run_store_dir(cfg, expected_identity(cfg)["key"])
    orig = killed_after(monkeypatch, 1)
    with pytest.raises(Killed):
        run_experiment(cfg, tmp_path / "killed", checkpoint_dir=folder)
    monkeypatch.setattr(ck.TaskCheckpoint, "_save_checkpoint", orig)
    unlink = Path.unlink

    def refuse(self, missing_ok=False):
        if folder in self.parents:
            raise PermissionError(13, "Permission denied", str(self))
        return unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", refuse)
    capsys.readouterr()
    run_single(make_cfg("method=er", "checkpoint=off", store), str(tmp_path / "run"))  # no SystemExit
    err = capsys.readouterr().err
    assert "resuming at task 2 of 3" in err
    warnings = [line for line in err.splitlines() if line.startswith(("warning:", "error:"))]
    assert warnings == [
        f"warning: cannot delete the finished run's checkpoints in {folder} (Permission denied: "
        f"{folder / 'after-task-0001.ckpt'}); its results are written: delete them by hand "
        "(docs/GUIDE.md, Cleaning checkpoints)"
    ]
    assert read_run(tmp_path / "run" / "results.json").ok and (folder / "after-task-0001.ckpt").is_file()


def relabel(path: Path, key: str) -> None:
    """Change a checkpoint's recorded identity to ``key`` and recompute its sha256 (a forger's edit)."""
    import hashlib
    import io as bio

    c = torch.load(path, weights_only=True)
    c["clsuite"]["identity"] = key
    buf = bio.BytesIO()
    torch.save(c, buf)
    path.write_bytes(buf.getvalue())
    ck.digest_path(path).write_text(hashlib.sha256(buf.getvalue()).hexdigest())


def test_a_relabelled_checkpoint_of_another_method_is_never_loaded(monkeypatch, tmp_path, capsys):
    """Issue 30: an ER checkpoint whose identity was changed to AdaER's, its checksum recomputed,
    resumed as AdaER (Acc 89.87 against 90.15 uninterrupted) and was sealed as AdaER. Its state
    (C-CMR's and E-BRS's keys) does not fit AdaER: a warning, and AdaER starts from task 1."""
    store = tmp_path / "ck"
    orig = killed_after(monkeypatch, 1)
    with pytest.raises(Killed) as e:
        run_experiment(make_cfg("method=er", "checkpoint=task_end"), tmp_path / "er", checkpoint_dir=store)
    monkeypatch.setattr(ck.TaskCheckpoint, "_save_checkpoint", orig)
    adaer = make_cfg("method=adaer", "checkpoint=task_end")
    relabel(e.value.args[0], identity_of(adaer, "cpu")["key"])
    capsys.readouterr()
    resumed = run_experiment(adaer, tmp_path / "adaer", checkpoint_dir=store)
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert warnings == [
        f"warning: ignoring checkpoint {store / 'after-task-0001.ckpt'}: its state does not fit this run (its replay "
        "state is clsuite.core.replay.random.RandomReplay's, this run's replay is clsuite.core.replay.ccmr.CCMRReplay)"
    ]
    full = run_experiment(make_cfg("method=adaer"), tmp_path / "full", checkpoint_dir=tmp_path / "ck-full")
    assert resumed["resumed_at_task"] is None and all(resumed[k] == full[k] for k in SAME)
    # the check itself: each part of the state that another build would not have
    _dm, learner, _ = ex.build(make_cfg("method=er"))
    c = {"state_dict": learner.state_dict(), "clsuite": {"state_of": ck.state_classes(learner)}}
    learner.on_save_checkpoint(c)
    assert ck.structure_problem(c, learner) is None
    for edit, why in [
        (lambda c: c["state_dict"].popitem(), "its network's parameters are not this run's"),
        (lambda c: c["clsuite"].pop("state_of"), "it does not say whose method state it holds"),
        (lambda c: c["continual"]["memory"].update(x=torch.zeros(7, 3)), "memory x is (7, 3), this run's"),
        (lambda c: c["continual"].update(update=None), "no update state, where this run's update has one"),
        (lambda c: c["continual"].update(replay={}), "its replay state lacks exclude_current_task"),
    ]:
        bad = {**c, "state_dict": dict(c["state_dict"]), "clsuite": dict(c["clsuite"]), "continual": {**c["continual"]}}
        bad["continual"]["memory"] = dict(c["continual"]["memory"])
        edit(bad)
        assert ck.structure_problem(bad, learner).startswith(why)


def test_cadence_and_the_store(monkeypatch, tmp_path):
    def due(cfg, times, write_s=0.0):  # the task ends (of 5) that write one, task i + 1 ending at times[i] s
        now = [0.0]
        c, out = ck.Cadence(cfg, 5, clock=lambda: now[0]), []
        for done, now[0] in enumerate(times, start=1):
            if c.due(done):
                out.append(done)
                now[0] += write_s  # the checkpoint's write
                c.saved()
        return out

    t = [30.0, 100.0, 170.0, 250.0, 900.0]
    assert due({"checkpoint": "task_end"}, t) == [1, 2, 3, 4] and due({"checkpoint": "off"}, t) == []
    assert due({"checkpoint": "every_k", "checkpoint_every": 2}, t) == [2, 4]
    # auto: a task end a minute or more after the start or the last checkpoint (30 s: not yet; 5: the last) ...
    assert due({"checkpoint": "auto"}, t) == [2, 3, 4]
    # ... and 50 writes' time or more after the last: a 3 s write waits 150 s (103 -> 250: 147 s, not yet)
    assert due({"checkpoint": "auto"}, t, write_s=3.0) == [2]
    saved = []
    orig = ck.TaskCheckpoint._save_checkpoint
    monkeypatch.setattr(
        ck.TaskCheckpoint, "_save_checkpoint", lambda self, tr, f: saved.append(int(f[-9:-5])) or orig(self, tr, f)
    )
    for mode, expect in [("task_end", [1, 2]), ("every_k", [2]), ("off", []), ("auto", [])]:
        saved.clear()
        run_experiment(
            make_cfg("method=er", f"checkpoint={mode}", "checkpoint_every=2"),
            tmp_path / mode,
            checkpoint_dir=tmp_path / "ck",
        )
        assert saved == expect, mode
        assert not (tmp_path / mode / ck.WEIGHTS_FILE).exists()  # keep_weights=false
    assert not (tmp_path / "ck").exists()


@pytest.mark.parametrize("top_k, dropped", [(2, [1, 2]), (1, [1, 2, 3])])
def test_the_store_keeps_the_newest_save_top_k(monkeypatch, tmp_path, top_k, dropped):
    """conf/callbacks' checkpoint.save_top_k: Lightning keeps the newest (the tasks done, monitored, mode
    max) and deletes an older one, with its digest, once the next is written."""
    removed, orig = [], ck.TaskCheckpoint._remove_checkpoint

    def remove(self, trainer, filepath):
        orig(self, trainer, filepath)
        left = sorted(p.name for p in Path(filepath).parent.iterdir())
        removed.append((int(Path(filepath).stem[-4:]), left))

    monkeypatch.setattr(ck.TaskCheckpoint, "_remove_checkpoint", remove)
    five = ["benchmark.n_tasks=5", "benchmark.synthetic.num_classes=10"]  # task ends 1-4 write one
    cfg = make_cfg("method=er", "checkpoint=task_end", *five, f"callbacks.checkpoint.save_top_k={top_k}")
    run_experiment(cfg, tmp_path / "run", checkpoint_dir=tmp_path / "ck")
    assert [k for k, _ in removed] == dropped
    newest = [f"after-task-{k:04d}.ckpt" for k in range(5 - top_k, 5)]
    assert removed[-1][1] == sorted([*newest, *(f"{n}.sha256" for n in newest)])
    assert not (tmp_path / "ck").exists()  # all deleted once the results file is written


def test_keep_weights_writes_the_final_model_beside_the_results(tmp_path):
    res = run_experiment(make_cfg("method=icarl", "keep_weights=true"), tmp_path, checkpoint_dir=tmp_path / "ck")
    c = torch.load(tmp_path / ck.WEIGHTS_FILE, weights_only=True)
    assert c["clsuite"]["next_task"] == 3 and c["continual"]["plugin"]["old_net"] is not None
    assert len(c["callbacks"]["AccuracyMatrix"]["rows"]) == 3 and res["resumed_at_task"] is None
    net = ex.build(make_cfg("method=icarl"))[1].net
    net.load_state_dict({k.removeprefix("net."): v for k, v in c["state_dict"].items()})
    assert not (tmp_path / "ck").exists()


def test_checkpoint_keys_are_validated_and_leave_the_identity_alone():
    for bad, needle in [
        ("checkpoint=always", "unknown checkpoint 'always'; valid choices: auto, task_end, every_k, off"),
        ("checkpoint_every=0", "checkpoint_every must be a whole number >= 1, got 0"),
        ("keep_weights=2", "keep_weights must be true or false, got 2"),
    ]:
        with pytest.raises(ConfigError, match=needle.replace("(", r"\(").replace(")", r"\)")):
            validate(make_cfg(bad))
    keys = {identity_of(make_cfg(*o), "cpu")["key"] for o in [[], ["checkpoint=task_end", "keep_weights=true"]]}
    assert len(keys) == 1


# ----------------------------------------------------------------------------- declared per-slot fields


class StampedReservoir(Reservoir):
    """A policy from outside src/: reservoir sampling that records the task each kept sample came in at."""

    def update(self, memory, x, y, t, learner=None):
        came_in = memory.declare("came_in", (2,), torch.long, fill=-7)  # (task, seen count) per slot
        super().update(memory, x, y, t, learner)
        filled = came_in[: memory.size]
        filled[filled[:, 0] == -7] = torch.tensor([learner.current_task, memory.seen])  # just written: at fill


def test_a_declared_field_starts_at_its_fill_on_append_replace_and_place():
    mem = Memory(4, (2,), 3)
    f = mem.declare("age", (), torch.long, fill=-1)
    assert mem.age is f and f.tolist() == [-1] * 4 and mem.declare("age", (), torch.long, fill=-1) is f
    with pytest.raises(ValueError, match="declared as"):
        mem.declare("age", (), torch.float32, fill=-1)
    with pytest.raises(ValueError, match="taken"):
        mem.declare("capacity")
    g = mem.declare("inf_score", (2,), fill=math.inf)
    x, y, t = torch.ones(4, 2), torch.tensor([0, 1, 2, 0]), torch.zeros(4, dtype=torch.long)
    mem.append(x, y, t)
    f[:] = torch.tensor([5, 6, 7, 8])
    g.zero_()
    mem.score[:] = 3.0
    mem.replace(torch.tensor([1]), x[:1], y[:1], t[:1])
    assert f.tolist() == [5, -1, 7, 8] and g[1].tolist() == [math.inf] * 2 and mem.score.tolist() == [3, 0, 3, 3]
    mem.place(torch.tensor([-1, 3, 3]), x[:3], y[:3], t[:3])  # slot 3 written twice, slot 0 untouched
    assert f.tolist() == [5, -1, 7, -1] and g[0].tolist() == [0, 0] and g[3].tolist() == [math.inf] * 2
    fresh = Memory(4, (2,), 3)
    fresh.load_state_dict(mem.state_dict())  # declared on load, then a lazy declare returns it
    assert fresh.declare("age", (), torch.long, fill=-1).tolist() == [5, -1, 7, -1]
    assert torch.equal(fresh.inf_score, g) and fresh.fills["inf_score"] == math.inf and fresh.size == 4


def test_a_field_declared_outside_src_is_written_and_checkpointed(monkeypatch, tmp_path):
    build = ex.build

    def with_stamps(cfg, source=None):
        dm, learner, device = build(cfg, source)
        learner.update_policy = StampedReservoir()
        return dm, learner, device

    monkeypatch.setattr(ex, "build", with_stamps)
    killed_after(monkeypatch, 1)
    with pytest.raises(Killed) as e:
        run_experiment(
            make_cfg("method=er", "checkpoint=task_end", "memory=20", "memory_per_class=false"),
            tmp_path,
            checkpoint_dir=tmp_path / "c",
        )
    mem = torch.load(e.value.args[0], weights_only=True)["continual"]["memory"]
    came_in, fills = mem["fields"]["came_in"], mem["fills"]["came_in"]
    assert fills == -7 and came_in.shape == (20, 2)
    assert (came_in[:, 0] == 0).all()  # after task 1 every slot holds a task-0 sample
    assert came_in[:, 1].max() == mem["seen"] and len(came_in[:, 1].unique()) > 2  # the batch it came in with


# ----------------------------------------------------------------------------- processes


def _cli(cwd, *args, env=None, **kw):
    flags = [a for a in args if a.startswith("-")]  # -m before the overrides (argparse)
    cmd = [sys.executable, str(ROOT / "src" / "run.py"), *flags, "benchmark=synthetic", "logger=none", "trainer=cpu"]
    cmd += ["trainer.progress_bar=false", "trainer.threads=1", *[a for a in args if a not in flags]]
    return subprocess.run(cmd, cwd=cwd, env={**os.environ, **(env or {})}, capture_output=True, text=True, **kw)


# Loaded into every process through PYTHONPATH: the process signals itself right after the first
# checkpoint it writes, once ($ONCE names a marker file).
_HOOK = f"""
import os, signal, sys
from pathlib import Path
sys.path.insert(0, {str(ROOT / "src")!r})
import clsuite.run.checkpoint as ck
_save = ck.TaskCheckpoint._save_checkpoint
def save(self, trainer, filepath):
    _save(self, trainer, filepath)
    once = Path(os.environ["ONCE"])
    if not once.exists():
        once.touch()
        os.kill(os.getpid(), getattr(signal, os.environ["SIGNAL"]))
ck.TaskCheckpoint._save_checkpoint = save
"""


def _hooked(tmp_path, sig: str) -> dict:
    hook = tmp_path / "hook"
    hook.mkdir(exist_ok=True)
    (hook / "sitecustomize.py").write_text(_HOOK)
    return {
        "PYTHONPATH": os.pathsep.join([str(hook), str(ROOT / "src")]),
        "ONCE": str(tmp_path / "once"),
        "SIGNAL": sig,
    }


def _results(folder: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(folder.rglob("results.json"))]


@pytest.mark.slow  # (the fast suite's: test_a_run_killed_after_task_1_of_3_resumes_to_the_same_result, in process)
@pytest.mark.parametrize("method", ["er", "adaer"])
def test_a_single_run_killed_by_sigkill_resumes_from_its_store(tmp_path, method):
    args = [f"method={method}", "checkpoint=task_end"]
    p = _cli(tmp_path, *args, "hydra.run.dir=killed", env=_hooked(tmp_path, "SIGKILL"), timeout=600)
    assert p.returncode == -signal.SIGKILL and not (tmp_path / "killed" / "results.json").exists()
    assert [q.name for q in (tmp_path / "outputs/.checkpoints").glob("*/*.ckpt")] == ["after-task-0001.ckpt"]
    p = _cli(tmp_path, *args, "hydra.run.dir=resumed", timeout=600)
    assert p.returncode == 0 and "resuming at task 2 of 3" in p.stderr, p.stderr[-2000:]
    assert "Warning" not in p.stderr, p.stderr[-2000:]  # (Lightning's "directory not empty": the store is read)
    p = _cli(tmp_path, *args, "hydra.run.dir=full", timeout=600)  # the store is gone: from task 1
    assert p.returncode == 0 and "resuming" not in p.stderr
    resumed, full = (json.loads((tmp_path / d / "results.json").read_text()) for d in ("resumed", "full"))
    assert resumed["resumed_at_task"] == 2 and all(resumed[k] == full[k] for k in SAME)
    assert not list((tmp_path / "outputs/.checkpoints").iterdir())


@pytest.mark.slow
def test_submitit_requeues_a_signalled_job_which_resumes_from_its_checkpoint(tmp_path):
    """launcher=submitit_local: SIGUSR2 (SLURM's time-out warning) after the first checkpoint; submitit
    checkpoints the job function and requeues it; the job continues from its task-end checkpoint."""
    args = ["-m", "method=er", "checkpoint=task_end", "launcher=submitit_local"]
    p = _cli(tmp_path, *args, "hydra.sweep.dir=requeued", env=_hooked(tmp_path, "SIGUSR2"), timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    logs = "".join(q.read_text() for q in (tmp_path / "requeued/.submitit").rglob("*_log.err"))
    assert "Caught signal SIGUSR2" in logs and "resuming at task 2 of 3" in logs  # requeued, then resumed
    p = _cli(tmp_path, *args, "hydra.sweep.dir=full", "reuse=false", timeout=600)  # not a copy
    assert p.returncode == 0, p.stderr[-3000:]
    (requeued,), (full,) = _results(tmp_path / "requeued"), _results(tmp_path / "full")
    assert requeued["resumed_at_task"] == 2 and full["resumed_at_task"] is None
    assert all(requeued[k] == full[k] for k in SAME)
    assert not list((tmp_path / "requeued").rglob("*.ckpt"))


# At batch 5 of task 2 of the run of seed 1, once: SIGKILL to the sweep's process, then to this
# joblib worker (the machine died: nothing records the job).
_KILL_IN_TASK_2 = f"""
import os, signal, sys
from pathlib import Path
sys.path.insert(0, {str(ROOT / "src")!r})
import clsuite.run.experiment as ex
from clsuite.core.callbacks import DivergenceGuard
_run, _step = ex.run_experiment, DivergenceGuard.on_train_batch_end
def run(cfg, out, **kw):
    os.environ["SEED_NOW"] = str(cfg.seed)
    return _run(cfg, out, **kw)
def step(self, trainer, learner, outputs, batch, batch_idx):
    _step(self, trainer, learner, outputs, batch, batch_idx)
    once = Path(os.environ["ONCE"])
    if learner.current_task == 1 and batch_idx == 5 and os.environ["SEED_NOW"] == "1" and not once.exists():
        once.touch()
        from hydra.core.hydra_config import HydraConfig  # (the sweep's pid: in the job's Hydra config)
        os.kill(HydraConfig.get().job.sweep_pid, signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)
ex.run_experiment, DivergenceGuard.on_train_batch_end = run, step
"""


@pytest.mark.slow
def test_a_killed_joblib_sweep_resumes_its_jobs_from_their_checkpoints_on_the_rerun(tmp_path):
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(_KILL_IN_TASK_2)
    env = {"PYTHONPATH": os.pathsep.join([str(hook), str(ROOT / "src")]), "ONCE": str(tmp_path / "once")}
    args = ["-m", "method=adaer", "seed=0,1", "checkpoint=task_end", "launcher=joblib", "hydra.launcher.n_jobs=2"]
    p = _cli(tmp_path, *args, "hydra.sweep.dir=k", env=env, timeout=600)
    assert p.returncode == -signal.SIGKILL and (tmp_path / "once").exists(), p.stderr[-3000:]
    job = tmp_path / "k" / "benchmark=synthetic,method=adaer,seed=1"
    assert [f.name for f in (job / "checkpoints").glob("*.ckpt")] == ["after-task-0001.ckpt"]
    assert not (job / "results.json").exists()
    p = _cli(tmp_path, *args, "hydra.sweep.dir=k", env=env, timeout=600)  # the rerun
    assert p.returncode == 0 and "resuming at task 2 of 3 (task 1 done) from" in p.stderr, p.stderr[-3000:]
    assert not list((tmp_path / "k").rglob("checkpoints"))
    p = _cli(tmp_path, *args, "hydra.sweep.dir=u", "reuse=false", env=env, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    killed, full = _results(tmp_path / "k"), _results(tmp_path / "u")
    assert killed[1]["resumed_at_task"] == 2 and [r["seed"] for r in killed] == [0, 1]
    assert all(a[k] == b[k] for a, b in zip(killed, full, strict=True) for k in SAME)
