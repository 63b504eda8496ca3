"""The reference's side of a parity run: Mammoth's own GSS, iCaRL and HAL classes, driven in-process
by Mammoth's training loop (:func:`run`) on the suite's materials, with small stand-ins for what needs
torchvision, kornia or its dataset registry (:func:`_install_stubs`; docs/notes/PARITY.md, "Making the record").
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import types
from argparse import ArgumentParser, Namespace
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

METHODS = {"gss": ("models.gss", "Gss"), "icarl": ("models.icarl", "ICarl"), "hal": ("models.hal", "HAL")}
_CURRENT: dict = {}  # the Stream that get_dataset() returns


def checkout_commit(path: Path) -> str | None:
    """The checkout's commit (short), or None when it is not a git checkout."""
    try:
        out = subprocess.run(["git", "-C", str(path), "rev-parse", "--short=7", "HEAD"], capture_output=True, text=True)
    except OSError:
        return None
    return out.stdout.strip() or None


# ----------------------------------------------------------------------------- stand-ins


def stub_module(name: str, path: Path | None = None, **attrs) -> types.ModuleType:
    """A module ``name`` holding ``attrs``, put in ``sys.modules`` (the MIR side's stand-ins too)."""
    m = types.ModuleType(name)
    if path is not None:
        m.__path__ = [str(path)]  # a package whose real submodules load from the checkout
    vars(m).update(attrs)
    sys.modules[name] = m
    return m


class ContinualModel(nn.Module):
    """Mammoth's ``ContinualModel``, what GSS, iCaRL and HAL read of it."""

    def __init__(self, backbone, loss, args, transform, dataset=None):
        super().__init__()
        self.net, self.loss, self.args, self.transform = backbone, loss, args, transform
        self.dataset = dataset if dataset is not None else _CURRENT["stream"]
        self.device = torch.device("cpu")
        self.num_classes = self.dataset.N_CLASSES
        self.n_tasks, self.cpt = self.dataset.N_TASKS, self.dataset.N_CLASSES_PER_TASK
        self._current_task, self._n_past_classes, self._n_seen_classes = 0, 0, self.cpt
        self.opt = torch.optim.SGD(self.net.parameters(), lr=args.lr, weight_decay=args.optim_wd, momentum=0.0)
        self.normalization_transform = lambda x: x

    current_task = property(lambda self: self._current_task)
    n_past_classes = property(lambda self: self._n_past_classes)
    n_seen_classes = property(lambda self: self._n_seen_classes)

    def forward(self, x):
        return self.net(x)

    def begin_task(self, dataset):
        pass

    def end_task(self, dataset):
        pass

    def meta_begin_task(self, dataset):
        self._n_past_classes = self._current_task * self.cpt
        self._n_seen_classes = (self._current_task + 1) * self.cpt
        self.begin_task(dataset)

    def meta_end_task(self, dataset):
        self.end_task(dataset)
        self._current_task += 1


def flipped_means() -> bool:
    """Whether iCaRL's class means take the flipped copies too, as Mammoth's do (``PARITY_NOFLIP=1``: not)."""
    return os.environ.get("PARITY_NOFLIP") != "1"


def _install_stubs(root: Path) -> None:
    """Stand-ins, on flat MNIST-sized tensors without augmentation, for what Mammoth's GSS, iCaRL, HAL and
    MNISTMLP import: torchvision's ``hflip`` (``x.flip(-1)``; identity under ``PARITY_NOFLIP=1``), ``apply_transform``
    (the identity here), ``utils.conf`` / ``args`` / ``batch_norm``, every ``backbone`` module but MNISTMLP
    (empty), ``datasets.get_dataset`` (:class:`Stream`) and ``ContinualModel`` (:class:`ContinualModel`)."""
    hflip = (lambda x: x.flip(-1)) if flipped_means() else (lambda x: x)
    functional = stub_module("torchvision.transforms.functional", hflip=hflip)
    transforms = stub_module("torchvision.transforms", functional=functional, Compose=object)
    stub_module("torchvision", transforms=transforms)
    import utils  # noqa: F401  (Mammoth's own utils/__init__.py: torch and numpy only; its submodules below)

    stub_module("utils.augmentations", apply_transform=lambda x, transform=None, autosqueeze=False: (
        x if transform is None else transform(x)))  # fmt: skip
    stub_module("utils.conf", get_device=lambda: torch.device("cpu"), warn_once=lambda *a, **k: None,
            create_seeded_dataloader=None)  # fmt: skip
    stub_module("utils.args", ArgumentParser=ArgumentParser, add_rehearsal_args=lambda parser: None)
    stub_module("utils.batch_norm", bn_track_stats=lambda model, condition: contextlib.nullcontext())
    stub_module("datasets", get_dataset=lambda args=None: _CURRENT["stream"])
    for f in (root / "backbone").glob("*.py"):  # backbone/__init__.py imports every backbone (timm, ...): all
        if f.stem not in ("__init__", "MNISTMLP"):  # but the MLP stand empty, so that it registers only the MLP
            stub_module(f"backbone.{f.stem}")
    stub_module("models", root / "models")
    stub_module("models.utils", root / "models" / "utils")
    stub_module("models.utils.continual_model", ContinualModel=ContinualModel)


def load(root: str | Path) -> dict:
    """Import Mammoth's classes from the checkout ``root``: {method: class, "mlp": BaseMNISTMLP}."""
    root = Path(root).resolve()
    if not (root / "models" / "gss.py").is_file():
        raise FileNotFoundError(f"{root} is not a Mammoth checkout (no models/gss.py)")
    sys.path.insert(0, str(root))
    _install_stubs(root)
    import importlib

    out = {m: getattr(importlib.import_module(mod), cls) for m, (mod, cls) in METHODS.items()}
    out["mlp"] = importlib.import_module("backbone.MNISTMLP").BaseMNISTMLP
    return out


# ----------------------------------------------------------------------------- the stream


class TaskData:
    """What Mammoth's code reads of ``train_loader.dataset``: ``data`` and ``targets`` (numpy)."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor):
        self.data, self.targets = x.clone(), y.numpy().copy()


class Loader:
    """Mammoth's train loader: shuffled batches of (inputs, labels, not_aug_inputs) over ``dataset``."""

    def __init__(self, dataset: TaskData, batch_size: int, generator: torch.Generator):
        self.dataset, self.batch_size, self.generator = dataset, batch_size, generator

    def __iter__(self):
        x, y = torch.as_tensor(self.dataset.data), torch.as_tensor(self.dataset.targets)
        order = torch.randperm(len(y), generator=self.generator)
        for i in range(0, len(y), self.batch_size):
            idx = order[i : i + self.batch_size]
            yield x[idx], y[idx], x[idx]


class Stream:
    """The suite's split as Mammoth's ``ContinualDataset`` (class-IL, no normalisation)."""

    SETTING = "class-il"

    def __init__(self, mat, args: Namespace, seed: int):
        self.args, self.mat = args, mat
        self.N_TASKS, self.N_CLASSES = len(mat.tasks), mat.num_classes
        self.N_CLASSES_PER_TASK = mat.num_classes // len(mat.tasks)
        self.generator = torch.Generator().manual_seed(seed)
        self.train_loader = None

    def set_task(self, k: int) -> None:
        x, y = self.mat.tasks[k].train
        self.train_loader = Loader(TaskData(x, y), self.args.batch_size, self.generator)

    def get_normalization_transform(self):
        return None


def mammoth_args(method: str, mat) -> Namespace:
    a = Namespace(buffer_size=mat.memory_capacity, batch_size=mat.batch_size, minibatch_size=mat.replay_size,
                  lr=mat.lr, n_epochs=1, optim_wd=0.0, optim_mom=0.0, dataset="seq-mnist", backbone="mnistmlp",
                  num_classes=mat.num_classes, mlp_hidden_size=400)  # fmt: skip
    if method == "gss":
        a.batch_num, a.gss_minibatch_size = 1, None
    elif method == "hal":
        a.hal_lambda, a.beta, a.gamma = 0.1, 0.5, 0.1
    elif method == "icarl":
        a.opt_wd, a.compute_theoretical_best, a.use_original_icarl_transform = 1e-5, False, False
    return a


def suite_weights_into(net: nn.Module, init: dict) -> None:
    """The suite's MLP (features.1, features.3, head) into Mammoth's BaseMNISTMLP (fc1, fc2, classifier)."""
    names = {"features.1": "fc1", "features.3": "fc2", "head": "classifier"}
    layers = {k.rsplit(".", 1)[0] for k in init}
    if layers != set(names):
        raise ValueError(f"the suite's weights do not fit Mammoth's MLP: layers {sorted(layers)}, not {sorted(names)}")
    state = {f"{names[k.rsplit('.', 1)[0]]}.{k.rsplit('.', 1)[1]}": v for k, v in init.items()}
    missing = net.load_state_dict(state, strict=False)  # (_features.* and net.* are the same tensors again)
    if [k for k in missing.missing_keys if not k.startswith(("_features.", "net."))] or missing.unexpected_keys:
        raise ValueError(f"the suite's weights do not fit Mammoth's MLP: {missing}")


def accuracy_row(predict, tasks) -> list[float]:
    """Micro accuracy (%) of ``predict(x) -> scores`` on every task's test split: the last row of R."""
    out = []
    with torch.no_grad():
        for tk in tasks:
            x, y = tk.test
            pred = torch.cat([predict(x[i : i + 2000]).argmax(1) for i in range(0, len(y), 2000)])
            out.append(100.0 * int((pred == y).sum()) / len(y))
    return out


def run(classes: dict, method: str, mat, seed: int) -> dict:
    """Mammoth's ``method`` on the suite's materials: {"R": a row per task, "acc": the mean of its last row}."""
    torch.manual_seed(seed)
    np.random.seed(seed)
    args = mammoth_args(method, mat)
    stream = Stream(mat, args, seed)
    _CURRENT["stream"] = stream
    net = classes["mlp"](int(np.prod(mat.tasks[0].train[0].shape[1:])), mat.num_classes, hidden_size=400)
    suite_weights_into(net, mat.init)
    model = classes[method](net, F.cross_entropy, args, transform=None, dataset=stream)
    R = []
    for k, task in enumerate(mat.tasks):
        stream.set_task(k)
        model.meta_begin_task(stream)
        model.train()
        if method == "icarl":  # Mammoth's offline form: the task's data + exemplars, shuffled
            batches = [(x, y) for x, y, _ in stream.train_loader]
        else:
            batches = task.batches
        for x, y in batches:
            model.observe(x, y, x)
        model.meta_end_task(stream)
        model.eval()
        R.append(accuracy_row(model, mat.tasks))
    return {"R": R, "acc": float(np.mean(R[-1]))}
