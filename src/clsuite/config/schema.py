"""The declared schema of the composed config: every run key's type, range, choices and meaning (a replay,
update or plugin class's keys: its constructor's annotations, ``clsuite.core.spec``), and the rules
that tie keys together; ``clsuite.config.check.validate`` checks a config against it (:func:`check`) and
``--help`` and docs/CONFIG.md are generated from it (docs/CONFIG.md, "Adding a key"; why a table:
docs/DEVELOPING.md, "Where a change goes").
"""

from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil
import re
from collections.abc import Callable, Mapping
from types import ModuleType

from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import MissingMandatoryValue, OmegaConfBaseException

from clsuite.core.errors import ConfigError, import_outside
from clsuite.core.spec import Flag, OneOf, Real, Spec, Whole, choices_text, params

SEED_MAX = 2**32 - 1  # numpy's seed range
RESUME_MODES = ("strict", "config_only", "off")  # clsuite.sweep.Job: what a finished result must match
CHECKPOINT_MODES = ("auto", "task_end", "every_k", "off")  # clsuite.run.checkpoint: when a run writes one
# Lightning precisions that run the suite end to end (tests/lab/test_schema.py: each trains on the CPU);
# "64-true" / "16-true" / "bf16-true" cast the network but not the data, the aliases (32, "16") are
# second spellings of one run, "16-mixed" on a CPU is silently run as bf16-mixed.
PRECISIONS = ("32-true", "16-mixed", "bf16-mixed")
CPU_PRECISIONS = ("32-true", "bf16-mixed")
MAX_SLOTS = 100_000  # memory slots always allowed (clsuite.config.schema._rule_memory)
MISSING = object()  # value()'s marker of a key absent from the config


def dotted_get(cfg, dotted: str, default=None):
    """``cfg["a"]["b"]`` for ``"a.b"`` in a DictConfig or a plain dict; ``default`` where a level is missing."""
    node = cfg
    for k in dotted.split("."):
        if not isinstance(node, Mapping) or k not in node:
            return default
        node = node[k]
    return node


# ----------------------------------------------------------------------------- the keys

# fmt: off
KEYS: dict[str, Spec] = {
    # conf/config.yaml
    "experiment": Spec("name", "groups runs: output folder multirun/<experiment>, W&B group"),
    "resume": OneOf(*RESUME_MODES, doc="sweeps: skip a job whose results match (strict: same identity | config_only | off)"),
    "reuse": Flag("sweeps: copy a result of the same identity from another experiment instead of training"),
    "checkpoint": OneOf(*CHECKPOINT_MODES, doc="task-end checkpoints for resuming (auto: a task end >= 1 min, and >= 50 writes' time, after the start or the previous one)"),
    "checkpoint_every": Whole(1, None, "every_k: a checkpoint after every k-th task"),
    "checkpoint_dir": Spec("path", "a single run's checkpoints, under <checkpoint_dir>/<identity key> (a sweep job's: its folder)"),
    "callbacks.checkpoint.save_top_k": Whole(
        -1, None, "the newest task-end checkpoints kept while a run goes on (Lightning's ModelCheckpoint; -1: all)"
    ),
    "keep_weights": Flag("keep the final model (model.ckpt) beside results.json"),
    "seed": Whole(0, SEED_MAX, "seed of the class order, the stream, the init and every random draw"),
    "reading": Spec("name", "the reading's name (PROTOCOL 8), set by reading=paper_text|mir_code"),
    "cites": Spec("notes", "the source line of each value a reading's file sets where the key has no comment in --cfg job (not in a run's identity)"),
    "memory": Whole(0, None, "M: memory size (total, or per class if memory_per_class); bounds per method: cross-key rules"),
    "memory_per_class": Flag("reading: false = M in total | true = M per class (MIR's --mem_size)"),
    "batch_size": Whole(1, None, "reading: |B_t|, incoming batch size"),
    "replay_size": Whole(1, None, "reading: |R|, replayed memory samples per step"),
    "replay_loss": OneOf("concat", "split", doc="reading: concat = one loss over R + B_t | split = mean(B_t) + mean(R)"),
    "exclude_current_task": Flag("reading: replay (and MIR/C-CMR candidates) only from past tasks' slots"),
    "candidates": Whole(1, None, "reading: C-CMR candidates; null = all of M (paper) | C random ones", null=True),
    "compare_to_old_logits": Flag("reading: MIR scores against the logits stored with the sample"),
    "scoring_updates_bn": Flag("reading: the candidates' forward under theta updates BatchNorm's running statistics (MIR's code)"),
    "logits_on_overwrite": OneOf("reset", "keep", doc="reading: stored logits of an overwritten slot: 0 | the previous occupant's (MIR's code)"),
    "tau": Real(0, 1, "C-CMR: p = round(tau |R|) interfered samples (R_e), q = |R| - p task-associated (R_t)"),
    "lambda": Real(0, 1, "imbalance (PROTOCOL 6): one class per task keeps round((1 - lambda) n)", hi_open=True),
    "lr": Real(0, None, "reading: SGD learning rate (a method's method.lr overrides it)", lo_open=True),
    "momentum": Real(0, 1, "SGD momentum", hi_open=True),
    "weight_decay": Real(0, None, "SGD weight decay (L2)"),
    "scenario": OneOf("class_il", "task_il", "domain_il", doc="one head over all classes | task-IL masks | domain-IL"),
    "eval_mask": OneOf("all", "seen", doc="all: argmax over the whole head | seen: only classes seen so far"),
    "eval_bn": OneOf("running", "memory", doc="BatchNorm statistics of each evaluation: null or running = the training's averages | memory = re-estimated over the memory, then restored", null=True),
    "eval_split": OneOf("test", "val", doc="test | val (tuning; needs data.val_fraction > 0)"),
    "data.root": Spec("path", "folder of the datasets (default $DATA_DIR, else ../shared/datasets if there, else ./data)"),
    "data.download": Flag("fetch the official files (md5-checked) when missing"),
    "data.verify_md5": Flag("md5-check every data file before reading it"),
    "data.class_order": OneOf("natural", "random", doc="natural | random (permuted with the seed)"),
    "data.val_fraction": Real(0, 1, "held out of each task's training samples", hi_open=True),
    "data.imbalance_semantics": OneOf("keep", "ratio", doc="keep: minority keeps (1 - lambda) n | ratio: lambda n"),
    "data.input_range": OneOf("unit", "symmetric", doc="reading: inputs null or unit = x / 255 in [0, 1] | symmetric = (x / 255 - 0.5) * 2 in [-1, 1] (MIR's CIFAR code)", null=True),
    "data.normalize": Flag("standardise inputs with the training set's mean and std"),
    "data.cache_dir": Spec("path", "decoded image-folder archives; null: $XDG_CACHE_HOME/clsuite, else ~/.cache/clsuite", null=True),
    # conf/benchmark/
    "benchmark.name": Spec("name", "the benchmark's name (results, tables)"),
    "benchmark.source": Spec("text", "dataset the tasks are cut from: a reader of clsuite.core.data.sources (or module:name)"),
    "benchmark.n_tasks": Whole(1, None, "T: number of tasks (at most classes // classes_per_task)"),
    "benchmark.classes_per_task": Whole(1, None, "classes per task (at most the source's classes)"),
    "benchmark.train_per_class": Whole(1, None, "training samples per class; null = all (at most the smallest class)", null=True),
    "benchmark.backbone": OneOf("mlp", "resnet18", doc="the paper's network for this benchmark (model=auto)"),
    "benchmark.iters_per_batch": Whole(1, None, "optimisation steps per incoming batch (split-CIFAR100: 5)"),
    "benchmark.synthetic.num_classes": Whole(1, None, "synthetic: number of Gaussian clusters", req=False),
    "benchmark.synthetic.shape": Spec("shape", "synthetic: input shape", req=False),
    "benchmark.synthetic.train_per_class": Whole(1, None, "synthetic: training samples per class", req=False),
    "benchmark.synthetic.test_per_class": Whole(1, None, "synthetic: test samples per class", req=False),
    "benchmark.synthetic.seed": Whole(0, SEED_MAX, "synthetic: seed of the clusters", req=False),
    "benchmark.synthetic.noise": Real(0, None, "synthetic: std of the Gaussian noise around each cluster's prototype", req=False),
    "benchmark.image_folder.path": Spec("text", "image_folder: folder, .tar or .tar.gz of train/<class>/*, test/<class>/* (under data.root)", req=False),
    "benchmark.image_folder.md5": Spec("text", "image_folder: the archive's md5 (checked with data.verify_md5); null: not checked", null=True, req=False),
    "benchmark.image_folder.classes": Whole(1, None, "image_folder: number of class folders", req=False),
    "benchmark.image_folder.train_per_class": Whole(1, None, "image_folder: training images of the smallest class", req=False),
    "benchmark.image_folder.channels": OneOf(1, 3, doc="image_folder: 1 (grey, L) | 3 (RGB)", req=False),
    # conf/model/
    "model.arch": OneOf("auto", "mlp", "resnet18", doc="auto: benchmark.backbone | mlp | resnet18 (reduced, nf)"),
    "model.hidden": Whole(1, None, "MLP: units per hidden layer", req=False),
    "model.depth": Whole(0, None, "MLP: hidden layers (0: a linear classifier)", req=False),
    "model.nf": Whole(1, None, "reduced ResNet-18: width of the first stage", req=False),
    "model.norm_groups": Whole(1, None, "reduced ResNet-18: null = BatchNorm | G = Continual Normalization (GroupNorm over G groups, then BatchNorm; G divides nf)", null=True, req=False),
    # conf/trainer/
    "trainer.accelerator": OneOf("auto", "cpu", "gpu", doc="auto: the GPU when there is one | cpu | gpu"),
    "trainer.device_index": Whole(0, None, "GPU index; null: 0 (a joblib sweep's job: the GPU of its slot)", null=True),
    "trainer.deterministic": Flag("Lightning's deterministic algorithms"),
    "trainer.numerics": OneOf(
        "native", "portable", doc="native: this CPU's kernels | portable: pinned, a seed's R the same on any x86-64 CPU"
    ),
    "trainer.precision": OneOf(*PRECISIONS, doc="Lightning precision (16-mixed: CUDA only)"),
    "trainer.progress_bar": OneOf("auto", True, False, doc="auto: the bar on a terminal, else progress lines | true: the bar | false: neither"),
    "trainer.log_every_n_steps": Whole(1, None, "loss logged every n incoming batches"),
    "trainer.threads": Whole(1, None, "torch / BLAS CPU threads; null: torch's default", null=True),
    "trainer.max_epochs": OneOf(0, doc="the Trainer's start: each task's fit raises it by the task's passes"),
    "trainer.enable_model_summary": Flag("Lightning's summary of the network at each task's fit"),
    "trainer.num_sanity_val_steps": Whole(0, None, "Lightning's sanity validation batches (the suite has no validation loop)"),
    "trainer.limit_val_batches": Whole(0, None, "Lightning's validation batches (none: R is measured by a callback)"),
    # conf/logger/
    "logger.name": Spec("text", "CSV, TensorBoard: the logger's folder | W&B: the run's name; null: every key of the run", null=True, req=False),
    "logger.mode": OneOf("offline", "online", "disabled", doc="W&B mode ($WANDB_MODE wins)", req=False),
    "logger.project": Spec("name", "W&B project", req=False),
    "logger.entity": Spec("text", "W&B entity (team or user)", null=True, req=False),
    "logger.group": Spec("text", "W&B group; null: the table cell", null=True, req=False),
    "logger.tags": Spec("names", "W&B tags added to the automatic ones", req=False),
    "logger.id": Spec("text", "W&B run id; null: a hash of the experiment and the identity key (a rerun of a stopped run continues it)", null=True, req=False),
    "logger.resume": OneOf("allow", "must", "never", "auto", doc="W&B: whether a run continues the W&B run of its id", req=False),
    "logger.version": Spec("text", "CSV, TensorBoard: a sub-folder of the logger's folder; empty: none", req=False),
    "logger.default_hp_metric": Flag("TensorBoard: log a placeholder hp_metric", req=False),
    "logger.required": Flag("W&B must start (else: a warning and the CSV logger); true: an error line before training", req=False),
    # conf/method/
    "method.name": Spec("name", "the method's name (results, tables)"),
    "method.lr": Real(0, None, "the method's own learning rate; null = the run's lr", lo_open=True, null=True),
    "method.joint": Flag("train on the i.i.d. union of all tasks, method.epochs passes (joint upper bound)", req=False),
    "method.epochs": Whole(1, None, "Joint: passes over the shuffled union of all tasks (1: the protocol's)", req=False),
    "method.replay_loss": OneOf("concat", "split", doc="the method's own replay_loss, under every reading", req=False),
    "method.replay_size": Whole(1, None, "the method's own |R| (A-GEM's g_ref batch); null = the reading's", null=True, req=False),
}

# fmt: on
BASES = {  # method.<slot>: null or a node whose _target_ subclasses this; the slot's classes: its package's
    "replay": "clsuite.core.replay.base.ReplayPolicy",
    "update": "clsuite.core.memory.base.UpdatePolicy",
    "plugin": "clsuite.core.methods.base.Plugin",
}
SLOTS = tuple(BASES)


@functools.cache
def targets(slot: str) -> list[str]:
    """The slot's classes, by name: every concrete subclass of its :data:`BASES` class in that class's
    package (``clsuite.core.replay``, ...), each declaring its keys in its constructor (``clsuite.core.spec``)."""
    base = locate(BASES[slot], f"method.{slot}")
    package = importlib.import_module(BASES[slot].rsplit(".", 2)[0])
    out = []
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        out += [
            f"{c.__module__}.{c.__qualname__}"
            for c in vars(module).values()
            if isinstance(c, type) and issubclass(c, base) and c is not base
            if c.__module__ == module.__name__ and not inspect.isabstract(c)
        ]
    return sorted(out, key=lambda t: t.rsplit(".", 1)[-1].lower())


def node_keys(target: str) -> dict[str, Spec]:
    """The keys a ``_target_``'s class declares (``clsuite.core.spec.params``); {} where none is found."""
    found = locate(target, "_target_")
    return params(found) if isinstance(found, type) else {}


def locate(target: str, what: str):
    """The object a dotted ``_target_`` names, found as ``hydra.utils.instantiate`` finds it (a module,
    then attributes or submodules), or None where there is none; a module that fails to import is a
    ``ConfigError`` naming ``what`` (``clsuite.core.errors.import_outside``)."""
    parts = target.split(".")
    if not all(parts):
        return None
    found = import_outside(parts[0], what)
    for i in range(1, len(parts)):
        if found is None:
            return None
        try:
            found = getattr(found, parts[i])
        except AttributeError:
            found = import_outside(".".join(parts[: i + 1]), what) if isinstance(found, ModuleType) else None
    return found


# ----------------------------------------------------------------------------- reading values


def value(cfg, key: str, spec: Spec | None = None):
    """``cfg``'s value at the dotted ``key``, resolved; a failed interpolation is a ``ConfigError``."""
    try:
        v = OmegaConf.select(cfg, key, default=MISSING, throw_on_missing=True)
        return OmegaConf.to_container(v, resolve=True) if isinstance(v, DictConfig | ListConfig) else v
    except MissingMandatoryValue:
        raise ConfigError(f"{key} is not set (???){_must(key, spec)}") from None
    except OmegaConfBaseException as e:  # the key itself, or a key below it (e.g. benchmark.note)
        why = " ".join(str(e).split("\n")[0].split())
        why = re.sub(r"^\w+ raised while resolving interpolation: ", "", why).strip("\"'")
        bad = e.full_key if getattr(e, "full_key", None) and str(e.full_key).startswith(f"{key}.") else key
        raise ConfigError(f"{bad}={_raw(cfg, bad)} does not resolve ({why}){_must(key, spec)}") from None


def _must(key: str, spec: Spec | None) -> str:
    if spec is None:
        return ""
    return (
        f"; valid choices: {choices_text(spec.choices)}" if spec.kind == "choice" else f"; {key} must be {spec.range()}"
    )


def _raw(cfg, key: str) -> str:
    parent, _, leaf = key.rpartition(".")
    node = OmegaConf.select(cfg, parent, throw_on_resolution_failure=False) if parent else cfg
    try:
        return str(node._get_node(leaf)._value())
    except Exception:
        return "?"


# ----------------------------------------------------------------------------- cross-key rules


def _rule_benchmark(cfg, sizes) -> str | None:
    """benchmark sizes fit the source: classes_per_task, n_tasks, train_per_class, val_fraction."""
    n_classes, available = sizes
    per_task = cfg.benchmark.classes_per_task
    for key, hi in (("benchmark.classes_per_task", n_classes), ("benchmark.n_tasks", n_classes // per_task)):
        if msg := Whole(1, hi).problem(key, value(cfg, key)):
            return msg
    per_class = cfg.benchmark.train_per_class
    if msg := Whole(1, available, null=True).problem("benchmark.train_per_class", per_class):
        return msg
    per_class, vf = per_class or available, cfg.data.val_fraction
    if per_class - round(vf * per_class) < 1:
        return (
            f"data.val_fraction={vf} leaves {per_class - round(vf * per_class)} training samples per class of "
            f"{per_class} (zero training steps); valid: data.val_fraction < {1 - 0.5 / per_class:.4f}"
        )
    return None


def source_size(src) -> tuple[int, int]:
    """(classes, training samples of the smallest class) of a bound source (``clsuite.core.data.sources``:
    its registration holds a number, or a key of the benchmark config that holds it)."""

    def size(v, what: str) -> int:
        if isinstance(v, int):
            return v
        n = dotted_get(src.benchmark, v)
        if n in (None, "???"):  # null, or OmegaConf's missing value
            raise ConfigError(f"benchmark.{v} is missing; benchmark.source={src.benchmark['source']} needs its {what}")
        if msg := Whole(1).problem(f"benchmark.{v}", n):
            raise ConfigError(msg)
        return n

    return size(src.classes, "number of classes"), size(src.train_per_class, "training samples per class")


def _rule_memory(cfg, sizes) -> str | None:
    """memory: at least one slot per task (GEM's task ring) or per class (HAL's ring, iCaRL's
    exemplars) of the method's layout; at most :data:`MAX_SLOTS` slots or the stream's training
    samples, whichever is larger (beyond both, an M only allocates memory no sample ever fills:
    ``memory=99999999999999999999999`` is refused here, not by the allocator; an M above a tiny
    test stream's size, e.g. the default 100 on synthetic data, stays valid)."""
    update = cfg.method.get("update")
    if not update:  # no memory (online, joint, oEWC, SI)
        return None
    bench, per_class = cfg.benchmark, bool(cfg.memory_per_class)
    classes = bench.n_tasks * bench.classes_per_task  # the stream's: what memory_per_class multiplies
    per_class_n = bench.train_per_class or sizes[1]
    stream = classes * (per_class_n - round(cfg.data.val_fraction * per_class_n))
    unit = classes if per_class else 1  # slots per unit of `memory`
    lo, why = 0, ""
    slots = getattr(locate(str(update.get("_target_")), "method.update._target_"), "layout", None)
    if slots == "task":
        t = update.get("n_tasks") or bench.n_tasks
        if t < bench.n_tasks:
            return (
                f"method.update.n_tasks must be null or a whole number >= {bench.n_tasks} (benchmark.n_tasks), got {t}"
            )
        lo, why = -(-t // unit), f"one ring slot per task, T={t}"
        if per := update.get("per_task"):
            lo, why = -(-(t * per) // unit), f"method.update.per_task={per} slots per task, T={t}"
    elif slots == "class":
        heads = bench.classes_per_task if cfg.scenario == "domain_il" else classes
        lo, why = -(-heads // unit), f"one slot per class, {heads} classes"
    hi = max(stream, MAX_SLOTS) // unit
    m = cfg.memory
    if lo <= m <= hi:
        return None
    size = f" per class (x {classes} classes)" if per_class else ""
    need = (
        f"method={cfg.method.name} needs {why}"
        if m < lo
        else f"at most {max(stream, MAX_SLOTS)} slots: the larger of {MAX_SLOTS} and the stream's {stream} samples"
    )
    return f"memory must be a whole number in [{lo}, {hi}]{size} ({need}), got {m}"


def _rule_scenario(cfg, sizes) -> str | None:
    """scenario: one the method's plugin supports (iCaRL and HAL need one output per class)."""
    plugin = cfg.method.get("plugin")
    ok = getattr(locate(str(plugin.get("_target_")), "method.plugin._target_"), "scenarios", None) if plugin else None
    if ok and cfg.scenario not in ok:
        return f"method={cfg.method.name} does not support scenario={cfg.scenario}; valid choices: {', '.join(ok)}"
    return None


def _rule_device(cfg, sizes) -> str | None:
    """trainer: gpu needs a CUDA device, device_index one of them, precision one the device runs."""
    t = cfg.trainer
    acc, index, precision = t.accelerator, t.get("device_index"), t.precision
    if acc == "cpu" or (acc == "auto" and index is None and precision in CPU_PRECISIONS):
        return None if acc != "cpu" or precision in CPU_PRECISIONS else _precision_line(precision, "cpu")
    import torch

    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if n == 0 and acc == "gpu":
        return "trainer.accelerator='gpu' but no CUDA device is available; valid here: auto, cpu"
    if index is not None and n and index >= n:
        return f"trainer.device_index must be in [0, {n - 1}] on this machine, got {index}"
    if n == 0 and precision not in CPU_PRECISIONS:
        return _precision_line(precision, "cpu")
    if n and precision == "bf16-mixed" and not torch.cuda.is_bf16_supported():
        return _precision_line(precision, "this GPU", ("32-true", "16-mixed"))
    return None


def _precision_line(precision, device, valid=CPU_PRECISIONS) -> str:
    return f"trainer.precision={precision} does not run on {device}; valid choices here: {', '.join(valid)}"


def _rule_eval_split(cfg, sizes) -> str | None:
    """eval_split=val needs a validation split (data.val_fraction > 0)."""
    if cfg.eval_split == "val" and cfg.data.val_fraction == 0:
        return "eval_split=val needs data.val_fraction > 0 (e.g. data.val_fraction=0.05)"
    return None


def _arch(cfg) -> str:
    """The network a config builds: model.arch, or the benchmark's backbone under auto."""
    return cfg.model.arch if cfg.model.arch != "auto" else cfg.benchmark.backbone


def _rule_eval_bn(cfg, sizes) -> str | None:
    """eval_bn=memory re-estimates BatchNorm over the memory: it needs both (a silent no-op otherwise)."""
    if cfg.get("eval_bn") != "memory":
        return None
    arch = _arch(cfg)
    if arch != "resnet18":
        return f"eval_bn=memory needs a network with BatchNorm (model.arch=resnet18), got model.arch={arch}"
    if not cfg.method.get("update") or not cfg.memory:
        return f"eval_bn=memory needs a method with a memory, got method={cfg.method.name} memory={cfg.memory}"
    return None


def _rule_norm_groups(cfg, sizes) -> str | None:
    """model.norm_groups replaces the ResNet's BatchNorm: the MLP has none (a silent no-op otherwise), and
    every width of the ResNet (nf, 2nf, 4nf, 8nf) must split into G groups."""
    groups = cfg.model.get("norm_groups")
    if groups is None:
        return None
    arch = _arch(cfg)
    if arch != "resnet18":
        return f"model.norm_groups={groups} needs a network with BatchNorm (model.arch=resnet18), got model.arch={arch}"
    if cfg.model.nf % groups:
        valid = ", ".join(str(g) for g in range(1, cfg.model.nf + 1) if cfg.model.nf % g == 0)
        return f"model.norm_groups={groups} must divide model.nf={cfg.model.nf}; valid: null, {valid}"
    return None


LOGGER_KINDS = ("wandb", "csv", "tensorboard", "none")


def logger_kind(node) -> str:
    """Which logger conf/logger/'s node builds, one of :data:`LOGGER_KINDS`: ``none`` without a ``_target_``,
    else from its class (or its path, where it no longer imports): W&B, TensorBoard, or a file logger
    (``csv``, any other). A node recorded before the selector was ``_target_`` (a results file's ``{name:
    csv}``) is its ``name``."""
    node = node if isinstance(node, Mapping) else {}
    if (target := node.get("_target_")) is None:
        return str(node.get("name")) if node.get("name") in LOGGER_KINDS else "none"
    try:
        found = locate(str(target), "logger._target_")
    except ConfigError:
        found = None
    names = " ".join([str(target), *(f"{c.__module__}.{c.__qualname__}" for c in getattr(found, "__mro__", ()))])
    return next((k for k in ("wandb", "tensorboard") if k in names.lower()), "csv")


def _rule_logger(cfg, sizes) -> str | None:
    """logger.required: only W&B can fail to start (csv and none always do), so only it can be required."""
    logger = cfg.get("logger")
    if logger is not None and logger.get("required") and (kind := logger_kind(logger)) != "wandb":
        return f"logger.required=true needs logger=wandb (the one logger that can fail to start), got logger={kind}"
    return None


# a callback's _target_: the suite's (bookkeeping: out of a run's identity) or a stock Lightning one (in it)
CALLBACK_SOURCES = ("clsuite.", "lightning.pytorch.callbacks.")
L_TRAINER = "lightning.pytorch.trainer.trainer.Trainer"  # trainer._target_: this class or a subclass
RECORD = "clsuite.run.record.RunRecord"  # callbacks.record: the run's sealed results file, never left out


def _rule_targets(cfg, sizes) -> str | None:
    """trainer._target_ names Lightning's Trainer (or a subclass); logger._target_ and each
    callbacks.<name>._target_ name a class or function (a null callback: none);
    the callbacks are clsuite's (left out of a run's identity) or stock Lightning ones (kept in it, since one
    such as StochasticWeightAveraging moves the numbers); other outside code is refused, and
    ``callbacks.record`` is :data:`RECORD` (without it a run writes no results)."""
    if (trainer := (cfg.get("trainer") or {}).get("_target_")) is not None:  # (a recorded config's: none)
        found = locate(str(trainer), "trainer._target_")
        if not isinstance(found, type) or L_TRAINER not in {f"{c.__module__}.{c.__qualname__}" for c in found.__mro__}:
            return f"trainer._target_ must name lightning.pytorch.Trainer or a subclass of it, got {trainer!r}"
    callbacks = cfg.get("callbacks") or {}
    record = (callbacks.get("record") or {}).get("_target_") if isinstance(callbacks.get("record"), Mapping) else None
    if record != RECORD:
        return (
            f"callbacks.record must be {{_target_: {RECORD}}} (the run's results file), got {callbacks.get('record')!r}"
        )
    nodes = [("logger", cfg.get("logger") or {})]
    nodes += [(f"callbacks.{k}", v) for k, v in callbacks.items() if v is not None]
    for key, node in nodes:
        target = node.get("_target_") if isinstance(node, Mapping) else None
        if target is None and key != "logger":  # (logger=none: a node without one)
            return f"{key} must be null or a node with a _target_, got {node!r}"
        if target is not None and key != "logger" and not str(target).startswith(CALLBACK_SOURCES):
            return (
                f"{key}._target_ must be one of clsuite's callbacks or a stock Lightning one "
                f"(lightning.pytorch.callbacks.*; they enter a run's identity), got {target!r}"
            )
        if target is not None and not callable(locate(str(target), f"{key}._target_")):
            return f"unknown {key}._target_ {target!r}: no class or function of that name"
    return None


RULES: tuple[Callable, ...] = (
    _rule_benchmark,
    _rule_memory,
    _rule_scenario,
    _rule_device,
    _rule_eval_split,
    _rule_eval_bn,
    _rule_norm_groups,
    _rule_logger,
    _rule_targets,
)


# ----------------------------------------------------------------------------- the check


def _check(cfg, key: str, spec: Spec, req: bool = True) -> None:
    """Check one key (absent: a ``ConfigError`` when it is required)."""
    v = value(cfg, key, spec)
    if v is MISSING and req:
        raise ConfigError(f"{key} is missing from the config (deleted?); {key} must be {spec.range()}")
    if v is not MISSING and (msg := spec.problem(key, v)):
        raise ConfigError(msg)


def _valid(slot: str) -> str:
    """The error line's tail naming the slot's classes (found only for an error: it imports every one)."""
    return "; valid classes: " + ", ".join(t.rsplit(".", 1)[-1] for t in targets(slot))


def _check_slot(cfg, slot: str) -> None:
    """``method.<slot>`` is null or a node whose ``_target_`` is a class found as Hydra will find it
    (:func:`locate`) that subclasses the slot's :data:`BASES` class; the node holds only what its
    constructor takes, everything the constructor needs, and each declared key (``Annotated[type, Spec]``)
    in its range."""
    node = value(cfg, f"method.{slot}")
    if node is MISSING or node is None:
        return
    if not isinstance(node, dict) or "_target_" not in node:
        raise ConfigError(f"method.{slot} must be null or a node with a _target_, got {node!r}{_valid(slot)}")
    target, key = node["_target_"], f"method.{slot}._target_"
    found = locate(str(target), f"{key} {target!r}")
    if found is None:
        raise ConfigError(f"unknown {key} {target!r}{_valid(slot)}")
    bases = {f"{c.__module__}.{c.__qualname__}" for c in found.__mro__} if isinstance(found, type) else ()
    if BASES[slot] not in bases:
        what = "" if isinstance(found, type) else f"a {type(found).__name__}, "
        raise ConfigError(f"{key} {target!r} is {what}not a subclass of {BASES[slot]}{_valid(slot)}")
    given = {k: v for k, v in node.items() if not re.match(r"^_\w+_$", k)}
    taken = inspect.signature(found).parameters
    if not any(p.kind is p.VAR_KEYWORD for p in taken.values()) and (unknown := [k for k in given if k not in taken]):
        valid_keys = ", ".join(taken) or "none"
        raise ConfigError(f"unknown key 'method.{slot}.{unknown[0]}'; valid keys of method.{slot}: {valid_keys}")
    for k, spec in params(found).items():
        _check(cfg, f"method.{slot}.{k}", spec)
    try:
        inspect.signature(found).bind(**given)
    except TypeError as e:
        raise ConfigError(f"method.{slot} cannot build {target}: {e}") from None


def check(cfg: DictConfig) -> None:
    """Every key of :data:`KEYS` against its :class:`Spec` (an interpolation that fails is named with the
    key's range), then the method's slots (:func:`_check_slot`). A failure is one ``ConfigError`` line
    (``<key> must be ..., got <value>`` or ``unknown <key> ...; valid choices``)."""
    for key, spec in KEYS.items():
        _check(cfg, key, spec, spec.req)
    for slot in SLOTS:
        _check_slot(cfg, slot)


def check_rules(cfg: DictConfig, source) -> None:
    """The cross-key :data:`RULES` in order, with the sizes of the benchmark's bound ``source``
    (``clsuite.core.data.sources.bind``), after :func:`check`."""
    sizes = source_size(source)
    for rule in RULES:
        if msg := rule(cfg, sizes):
            raise ConfigError(msg)
