"""Task-end checkpoints: a killed run continues from its last finished task. When one is written
(:class:`Cadence`); Lightning's ``ModelCheckpoint`` at those task ends (:class:`TaskCheckpoint`, conf/callbacks/);
an atomic write plus a sha256 (:class:`AtomicCheckpointIO`); which one a run may trust (:class:`CheckpointStore`,
:func:`structure_problem`); Lightning's resume (``trainer.fit(ckpt_path=)``): docs/GUIDE.md, "Checkpoints".
"""

from __future__ import annotations

import io
import re
import sys
import time
import warnings
from pathlib import Path

import torch
from lightning.fabric.utilities.seed import _collect_rng_states, _set_rng_states
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.plugins.io import TorchCheckpointIO

from clsuite.run.io import Unreadable, os_error_line, read_regular, sha256, write_bytes_atomic

# auto: a task end at least AUTO_INTERVAL_S after the run's start or its last checkpoint, and at least
# AUTO_WRITES times that checkpoint's write time (docs/notes/CHECKPOINTS.md, "Why auto is time-based")
AUTO_INTERVAL_S, AUTO_WRITES = 60.0, 50
KEEP = 2  # newest checkpoints kept while a run goes on (conf/callbacks/default.yaml: save_top_k)
FORMAT = 2  # 2: the generators as Lightning collects them
WEIGHTS_FILE = "model.ckpt"  # keep_weights=true: the final checkpoint, beside results.json
PREFIX, SUFFIX = "after-task-", ".ckpt"
NAME = re.compile(rf"{PREFIX}(\d+){re.escape(SUFFIX)}")  # after-task-<k>.ckpt: written after task k (1..T)
# a resumed run finds its own checkpoints in the folder (CheckpointStore.latest), as it should
warnings.filterwarnings("ignore", message="Checkpoint directory .* exists and is not empty")


class Cadence:
    """Which task ends write a checkpoint (``checkpoint``, ``checkpoint_every``: docs/GUIDE.md, "Checkpoint keys")."""

    def __init__(self, cfg, n_tasks: int, clock=time.monotonic):
        self.mode, self.n_tasks, self.clock = cfg.get("checkpoint", "auto"), n_tasks, clock
        self.k = int(cfg.get("checkpoint_every") or 1) if self.mode == "every_k" else 1
        self.last = self.asked = clock()
        self.write_s = 0.0  # the last checkpoint's write time

    def due(self, done: int) -> bool:
        """After ``done`` finished tasks: write a checkpoint now? (True: its write starts now.)"""
        if self.mode == "off" or done >= self.n_tasks:
            return False
        self.asked = self.clock()
        if self.mode == "auto":
            return self.asked - self.last >= max(AUTO_INTERVAL_S, AUTO_WRITES * self.write_s)
        return done % self.k == 0

    def saved(self) -> None:
        self.last = self.clock()
        self.write_s = self.last - self.asked


def run_store_dir(cfg, key: str) -> Path:
    """A single run's checkpoints: ``<checkpoint_dir>/<the identity key's first 20 hex digits>``."""
    return Path(cfg.checkpoint_dir) / key[:20]


def warn(msg: str) -> None:
    print(f"warning: {msg}", file=sys.stderr)


# ----------------------------------------------------------------------------- the file


def digest_path(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _remove(path: Path) -> None:
    path.unlink(missing_ok=True)
    digest_path(path).unlink(missing_ok=True)


class CorruptCheckpoint(Exception):
    pass


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning's torch checkpoint file with its sha256 in ``<file>.sha256`` (written last: a file without
    its digest, or with another, is never loaded); loaded only when the digest matches, with ``weights_only``,
    onto ``map_location`` unless a load names another. Written by ``clsuite.run.io.write_bytes_atomic``, not
    Lightning's ``_atomic_save``: that one stages the file in the system's temporary folder without fsync (a
    copy where it is another filesystem), and its digest would need the file read back."""

    def __init__(self, map_location=None):
        self.map_location = map_location

    def save_checkpoint(self, checkpoint, path, storage_options=None) -> None:
        buf = io.BytesIO()
        torch.save(checkpoint, buf)
        data, path = buf.getvalue(), Path(path)
        digest_path(path).unlink(missing_ok=True)  # the file is invalid until its digest is written
        write_bytes_atomic(path, data)
        write_bytes_atomic(digest_path(path), sha256(data).encode())

    def remove_checkpoint(self, path) -> None:
        digest_path(Path(path)).unlink(missing_ok=True)
        super().remove_checkpoint(path)

    def load_checkpoint(self, path, map_location=None, weights_only=True) -> dict:
        path = Path(path)
        try:  # regular files only: a FIFO named after-task-0001.ckpt never blocks the run
            data, digest = read_regular(path, limit=None), read_regular(digest_path(path), 1024).decode().strip()
        except (OSError, Unreadable, UnicodeDecodeError) as e:
            why = e.strerror if isinstance(e, OSError) else str(e)
            raise CorruptCheckpoint(f"unreadable or without its digest ({why})") from None
        if sha256(data) != digest:
            raise CorruptCheckpoint("its content does not match its sha256 (partial or corrupt)")
        try:  # weights_only: tensors and plain containers only, never pickled code
            return torch.load(io.BytesIO(data), map_location=map_location or self.map_location, weights_only=True)
        except Exception as e:
            raise CorruptCheckpoint(f"torch.load failed: {str(e).splitlines()[0]}") from None


# ----------------------------------------------------------------------------- random generators


def rng_states() -> dict:
    """Every generator a run draws from, as Lightning collects them (torch, its CUDA ones, numpy, python),
    numpy's key as a list: plain types, loadable with ``weights_only``."""
    states = _collect_rng_states(include_cuda=True)
    name, key, *rest = states["numpy"]
    return {**states, "numpy": (name, key.tolist(), *rest)}


def set_rng_states(states: dict) -> None:
    """Lightning's restore of :func:`rng_states`, its tensors first back on the CPU (a checkpoint
    loaded onto a GPU)."""
    _set_rng_states({**states, "torch": states["torch"].cpu(), "torch.cuda": [s.cpu() for s in states["torch.cuda"]]})


# ----------------------------------------------------------------------------- the store


class CheckpointStore:
    """The checkpoints of one run identity in one folder (:class:`TaskCheckpoint` writes them). An OS
    error on the folder is a warning, once (:meth:`lost`): from then on nothing is written, and the run goes on."""

    def __init__(self, folder, key: str):
        self.folder, self.key = Path(folder), key
        self.io = AtomicCheckpointIO()
        self.broken: str | None = None  # why the store stopped writing (an OS error), once it did

    def path(self, done: int) -> Path:
        """The file written after task ``done`` (1..T) finished."""
        return self.folder / f"{PREFIX}{done:04d}{SUFFIX}"

    def files(self) -> list[Path]:
        """Checkpoint files, newest (most tasks done) first."""
        if not self.folder.is_dir():
            return []
        found = [(int(m[1]), p) for p in self.folder.glob(f"{PREFIX}[0-9]*{SUFFIX}") if (m := NAME.fullmatch(p.name))]
        return [p for _, p in sorted(found, reverse=True)]

    def lost(self, what: str, e: OSError) -> None:
        if self.broken is None:
            self.broken = os_error_line(e)
            warn(f"{what} ({self.broken}); the run goes on without checkpoints and writes its results")

    def latest(self, map_location=None, fits=None) -> tuple[Path, dict] | None:
        """(path, its ``clsuite`` record) of the newest valid checkpoint of this identity, else None
        (each one passed over: a warning). ``fits(checkpoint)``: why its state does not fit the run, or None."""
        try:
            found = self.files()
        except OSError as e:  # a name too long, a folder that cannot be listed
            self.lost("cannot read the checkpoint folder", e)
            return None
        for path in found:
            try:
                ckpt = self.io.load_checkpoint(path, map_location=map_location)
            except CorruptCheckpoint as e:
                warn(f"ignoring checkpoint {path}: {e}")
                continue
            meta = ckpt.get("clsuite") or {}
            if meta.get("format") != FORMAT and meta.get("identity") == self.key:
                warn(f"ignoring checkpoint {path}: written by other code (checkpoint format {meta.get('format')}, "
                     f"this code's is {FORMAT})")  # fmt: skip
                continue
            if meta.get("identity") != self.key:
                warn(f"ignoring checkpoint {path}: made by another run identity ({str(meta.get('identity'))[:12]})")
                continue
            if fits is not None and (why := fits(ckpt)):
                warn(f"ignoring checkpoint {path}: its state does not fit this run ({why})")
                continue
            return path, meta
        return None

    def clear(self) -> None:
        """Delete every checkpoint of the folder (the run is finished), and the folder when empty.
        An OS error is a warning: the results are written, the files stay (docs/GUIDE.md, "Checkpoints")."""
        try:
            if not self.folder.is_dir():
                return
            for path in [*self.files(), *self.folder.glob(f".{PREFIX}*.tmp")]:
                _remove(path)  # (a .tmp file: a killed write's)
            if not any(self.folder.iterdir()):
                self.folder.rmdir()
        except OSError as e:
            warn(f"cannot delete the finished run's checkpoints in {self.folder} ({os_error_line(e)}); its results "
                 "are written: delete them by hand (docs/GUIDE.md, Cleaning checkpoints)")  # fmt: skip


# ----------------------------------------------------------------------------- save and restore


class TaskCheckpoint(ModelCheckpoint):
    """Lightning's ``ModelCheckpoint`` at the suite's task ends: at the end of each fit (a task, after its
    task-end hooks and its row of R; Lightning's own triggers, epoch ends and steps, come before those) that
    ``cadence`` picks, ``<dirpath>/after-task-<k>.ckpt``, keeping the ``save_top_k`` newest (the monitored
    ``task``: the tasks done; ``passes``: the fit loop's epochs per task). Adds the run's identity, its place
    in the stream, its wall time and its generators to every checkpoint the trainer writes; puts the wall
    time and the generators back when a fit restores one (``trainer.fit(ckpt_path=)``: after the learner's
    state, before the first batch). An OS error while writing is one warning (``store``), and no more writes.
    """

    def __init__(
        self, key: str, store=None, cadence: Cadence | None = None, passes=1, t0=None, save_top_k=KEEP, cpu0=None
    ):
        super().__init__(
            dirpath=None if store is None else store.folder,
            filename=PREFIX + "{task:04d}",
            monitor="task",
            mode="max",
            save_top_k=save_top_k,
            auto_insert_metric_name=False,
            every_n_epochs=0,  # (Lightning's epoch-end trigger off: a task's end is its fit's, cadence's)
            enable_version_counter=False,  # a file of the same name is replaced (one left by a killed process)
        )
        self.key, self.store, self.cadence, self.passes = key, store, cadence, passes
        self.wall_before = 0.0  # wall time of the run's earlier (interrupted) processes
        self._t0 = time.perf_counter() if t0 is None else t0  # this process's start of the run
        self.cpu_before = 0.0  # CPU time of the run's earlier processes
        self._cpu0 = time.process_time() if cpu0 is None else cpu0

    @classmethod
    def for_run(cls, run, save_top_k: int = KEEP) -> TaskCheckpoint:
        """conf/callbacks' ``checkpoint``: into the run's store, at the ends ``checkpoint`` picks."""
        cadence = Cadence(run.cfg, len(run.schedule))
        return cls(run.ident["key"], run.store, cadence, run.passes, run.t0, save_top_k, run.cpu0)

    def _monitor_candidates(self, trainer) -> dict:
        return {**super()._monitor_candidates(trainer), "task": torch.tensor(trainer.current_epoch // self.passes)}

    def on_fit_end(self, trainer, pl_module) -> None:
        done = trainer.current_epoch // self.passes  # the tasks trained so far
        if self.cadence is None or self.store.broken is not None or not self.cadence.due(done):
            return
        try:
            self._save_topk_checkpoint(trainer, self._monitor_candidates(trainer))
        except OSError as e:
            self.store.lost("cannot write checkpoints", e)
        else:
            self.cadence.saved()

    @property
    def wall_time_s(self) -> float:
        """The run's wall time so far, over all its processes."""
        return self.wall_before + time.perf_counter() - self._t0

    @property
    def cpu_time_s(self) -> float:
        """The run's CPU time so far (this process's, all its threads: ``time.process_time``), over all its processes."""
        return self.cpu_before + time.process_time() - self._cpu0

    def on_save_checkpoint(self, trainer, pl_module, checkpoint: dict) -> None:
        checkpoint["clsuite"] = {
            "format": FORMAT,
            "identity": self.key,
            "next_task": trainer.current_epoch // self.passes,
            "wall_time_s": self.wall_time_s,
            "cpu_time_s": self.cpu_time_s,
            "rng": rng_states(),
            "state_of": state_classes(pl_module),  # whose state the checkpoint holds (structure_problem)
        }

    def on_load_checkpoint(self, trainer, pl_module, checkpoint: dict) -> None:
        self.wall_before = float(checkpoint["clsuite"]["wall_time_s"])
        self.cpu_before = float(checkpoint["clsuite"].get("cpu_time_s", 0.0))  # (written since cpu_time_s)
        set_rng_states(checkpoint["clsuite"]["rng"])  # (a fit's setup, before this hook, draws nothing)


PARTS = ("replay", "update", "plugin")  # the learner's seams whose state a checkpoint holds


def state_classes(learner) -> dict:
    """``{part: "module.Class"}`` of the learner's replay policy, update policy and plugin (None: none)."""
    objs = {"replay": learner.replay, "update": learner.update_policy, "plugin": learner.plugin}
    return {k: None if o is None else f"{type(o).__module__}.{type(o).__qualname__}" for k, o in objs.items()}


def _shape(v):
    return tuple(v.shape) if torch.is_tensor(v) else type(v).__name__


def structure_problem(ckpt: dict, learner) -> str | None:
    """Why a checkpoint's state does not fit the freshly built ``learner`` (None when it does): the
    network, whose state it holds, the memory, each part's state (docs/GUIDE.md, "Resuming
    from a checkpoint"). A part may add keys as it runs (SI's ``g``); a tensor's first size may grow (HAL's
    anchors, one per class seen); a value filled later (oEWC's Fisher) is None in a fresh run."""
    net = {k: tuple(v.shape) for k, v in learner.state_dict().items()}
    theirs = ckpt.get("state_dict")
    if not isinstance(theirs, dict) or {k: _shape(v) for k, v in theirs.items()} != net:
        return "its network's parameters are not this run's (names or shapes)"
    held, mine = (ckpt.get("clsuite") or {}).get("state_of"), state_classes(learner)
    if not isinstance(held, dict):
        return "it does not say whose method state it holds"
    for part in PARTS:
        if held.get(part) != mine[part]:
            return f"its {part} state is {held.get(part)}'s, this run's {part} is {mine[part]}"
    fresh: dict = {}
    learner.on_save_checkpoint(fresh)  # what this run would write: its declared state
    want_all, got_all = fresh["continual"], ckpt.get("continual")
    if not isinstance(got_all, dict) or not isinstance(got_all.get("memory"), dict):
        return "it holds no method state"
    mem, their_mem = want_all["memory"], got_all["memory"]
    their_fields = their_mem.get("fields") if isinstance(their_mem.get("fields"), dict) else {}
    for key, want in [*((k, mem[k]) for k in ("x", "y", "t")), *mem["fields"].items()]:
        got = their_mem.get(key, their_fields.get(key))
        if _shape(got) != _shape(want):
            return f"memory {key} is {_shape(got)}, this run's {_shape(want)}"
    for part in PARTS:
        want, got = want_all[part], got_all.get(part)
        if want is None:
            continue
        if not isinstance(got, dict):
            return f"no {part} state, where this run's {part} has one"
        if lacking := sorted(set(want) - set(got)):
            return f"its {part} state lacks {', '.join(lacking)}"
        for k, v in want.items():
            g = got[k]
            if torch.is_tensor(v) and torch.is_tensor(g) and (v.dim() != g.dim() or v.shape[1:] != g.shape[1:]):
                return f"{part}.{k} is {_shape(g)}, this run's {_shape(v)}"
    return None
