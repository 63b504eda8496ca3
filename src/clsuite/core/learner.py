"""The continual learner: a LightningModule with manual optimization.

One incoming batch B_t -> ``iters_per_batch`` updates, each re-selecting its
replay batch R from the memory (PROTOCOL section 2). The memory itself is
updated after the batch by the ``MemoryUpdate`` callback. The three seams a
method fills, and the order they are called in: ``clsuite.core.methods.base``.
"""

from __future__ import annotations

import lightning as L
import torch
import torch.nn.functional as F

from clsuite.core.memory.base import UpdatePolicy
from clsuite.core.memory.buffer import Memory
from clsuite.core.methods.base import Plugin
from clsuite.core.replay.base import ReplayPolicy

LOSS_FORMS = ("concat", "split")


class _Computed(torch.autograd.Function):
    """A loss whose gradient with respect to ``params`` is already computed (``grads``): its backward
    hands each parameter d/d(loss) times its gradient instead of going through the network again."""

    @staticmethod
    def forward(ctx, loss, grads, *params):
        ctx.grads = grads
        return loss.clone()

    @staticmethod
    def backward(ctx, grad_out):
        return None, None, *(grad_out * g for g in ctx.grads)


class ContinualLearner(L.LightningModule):
    def __init__(
        self,
        net,
        *,
        memory: Memory,
        replay: ReplayPolicy | None = None,
        update: UpdatePolicy | None = None,
        plugin: Plugin | None = None,
        lr: float = 0.1,
        momentum: float = 0.0,
        weight_decay: float = 0.0,
        iters_per_batch: int = 1,
        replay_size: int = 20,
        replay_loss: str = "concat",
        scenario: str = "class_il",
        task_classes: torch.Tensor | None = None,
        eval_mask: str = "all",
    ):
        super().__init__()
        if replay_loss not in LOSS_FORMS:
            raise ValueError(f"unknown replay_loss {replay_loss!r}; valid: {', '.join(LOSS_FORMS)}")
        self.automatic_optimization = False
        self.net, self.memory = net, memory
        self.replay, self.update_policy = replay, update
        self.plugin = plugin or Plugin()
        self.lr, self.momentum, self.weight_decay = lr, momentum, weight_decay
        self.iters_per_batch, self.replay_size, self.replay_loss_form = iters_per_batch, replay_size, replay_loss
        self.scenario, self.eval_mask = scenario, eval_mask
        self.register_buffer("task_classes", task_classes, persistent=False)  # [T, classes per task]
        self.current_task = 0
        self.seen_tasks = 0
        self._optimizer = None
        self.train_steps = 0  # real updates on incoming batches (all tasks)
        self.last_loss: torch.Tensor | None = None  # the last iteration's total loss, detached, on the device
        self.last_loss_parts: dict[str, torch.Tensor] = {}  # its "current" / "replay" parts, detached
        self.want_loss_parts = False  # set by clsuite.run.loggers.RunLogger before a logging step
        self._shared: tuple | None = None  # (B_t, None or (its loss, its gradient)) in an update that shares it

    # -- optimisation --------------------------------------------------------
    def configure_optimizers(self):
        # One optimizer for the whole stream: Lightning calls this at every fit.
        if self._optimizer is None:
            self._optimizer = torch.optim.SGD(
                self.net.parameters(), lr=self.lr, momentum=self.momentum, weight_decay=self.weight_decay
            )
        return self._optimizer

    # -- forward -------------------------------------------------------------
    def logit_mask(self, t: torch.Tensor) -> torch.Tensor:
        """[B, C] bool: the logits sample i may use, given its task id t[i]: the whole
        head (class-/domain-IL) or its task's classes (task-IL)."""
        C = self.net.head.out_features
        if self.scenario != "task_il":
            return torch.ones(len(t), C, dtype=torch.bool, device=t.device)
        mask = torch.zeros(len(t), C, dtype=torch.bool, device=t.device)
        return mask.scatter_(1, self.task_classes[t], True)

    def logits(self, x, t, net_out=None):
        """Training logits (of ``x``, or the given ``net_out``), -inf outside ``logit_mask(t)``."""
        out = self.net(x) if net_out is None else net_out
        if self.scenario == "task_il":
            out = out.masked_fill(~self.logit_mask(t), float("-inf"))
        return out

    def forward(self, x, t):
        return self.logits(x, t)

    @torch.no_grad()
    def predict(self, x, t):
        """Test-time class scores: plugin classifier (iCaRL) or the masked head."""
        out = self.plugin.predict(self, x, t)
        if out is None:
            out = self.logits(x, t)
        if self.eval_mask == "seen" and self.scenario == "class_il":
            seen = torch.zeros(out.shape[1], dtype=torch.bool, device=out.device)
            seen[self.task_classes[: self.seen_tasks].flatten()] = True
            out = out.masked_fill(~seen, float("-inf"))
        return out

    # -- the step ------------------------------------------------------------
    def shared_batch_grads(self, x, y, t):
        """grad_theta l(f_theta; B_t) of the update under way, for the virtual step
        (``clsuite.core.replay.virtual``), when the update's loss is the learner's own split loss: one
        forward and one backward of B_t then serve both, as in MIR's code (``mir.py`` l.304-313,
        before the candidates are scored), so BatchNorm sees B_t once, before the candidates and R,
        and the update's backward takes this gradient as it is. None otherwise (the concatenated
        loss, a plugin's own loss, or outside an update)."""
        if self._shared is None or self._shared[0] is not x:
            return None
        if self._shared[1] is None:
            loss = F.cross_entropy(self.logits(x, t), y)
            self._shared = (x, (loss.detach(), torch.autograd.grad(loss, list(self.net.parameters()))))
        return self._shared[1][1]

    def batch_loss(self, x, y, t):
        """l(f_theta; B_t): the shared one (above), its gradient the one already computed, else a new forward."""
        if self._shared is None or self._shared[0] is not x or self._shared[1] is None:
            return F.cross_entropy(self.logits(x, t), y)
        loss, grads = self._shared[1]
        return _Computed.apply(loss, grads, *self.net.parameters())

    def replay_loss(self, x, y, t, idx):
        """Alg. 1 line 10: l(f_theta; R + B_t), mean over the concatenated batch
        ("concat"), or mean(B_t) + mean(R) as in MIR's code ("split")."""
        if idx is None or idx.numel() == 0:
            return self.batch_loss(x, y, t)
        mx, my, mt = self.memory.get(idx)
        if self.replay_loss_form == "split":
            current, replay = self.batch_loss(x, y, t), F.cross_entropy(self.logits(mx, mt), my)
            self.last_loss_parts = {"current": current.detach(), "replay": replay.detach()}
            return current + replay
        out, target = self.logits(torch.cat([x, mx]), torch.cat([t, mt])), torch.cat([y, my])
        if self.want_loss_parts:  # a logging step only: the mean loss over B_t and over R
            ce = F.cross_entropy(out.detach(), target, reduction="none")
            self.last_loss_parts = {"current": ce[: len(y)].mean(), "replay": ce[len(y) :].mean()}
        return F.cross_entropy(out, target)

    def select_replay(self, x, y, t):
        if self.replay is None or len(self.memory) == 0:
            return None  # no replay while memory is empty
        return self.replay.select(self, x, y, t, self.replay_size)

    def training_step(self, batch, batch_idx):
        x, y, t = batch
        opt = self.optimizers()
        shares = self.replay_loss_form == "split" and type(self.plugin).loss is Plugin.loss  # the learner's own loss
        for _ in range(self.iters_per_batch):
            self.last_loss_parts = {}
            self._shared = (x, None) if shares else None
            idx = self.select_replay(x, y, t)
            loss = self.plugin.loss(self, x, y, t, idx)
            if loss is None:
                loss = self.replay_loss(x, y, t, idx)
            loss = loss + self.plugin.penalty(self, x, y, t)
            self.last_loss = loss.detach()  # read by callbacks (divergence guard, logging): no sync here
            opt.zero_grad(set_to_none=False)
            self.manual_backward(loss)
            self.plugin.before_step(self, x, y, t, idx)
            opt.step()
            self.plugin.after_step(self)
            self._shared = None
        self.train_steps += 1
        return None

    # -- task boundaries (start: clsuite.core.callbacks.TaskStart, at each fit's start) --
    def start_task(self, task: int) -> None:
        self.current_task = task
        self.seen_tasks = max(self.seen_tasks, task + 1)
        self.plugin.on_task_start(self, task)

    # -- checkpoint (clsuite.run.checkpoint): Lightning's hooks carry everything beyond the net's weights
    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["continual"] = {
            "learner": {
                "current_task": self.current_task,
                "seen_tasks": self.seen_tasks,
                "train_steps": self.train_steps,
            },
            "memory": self.memory.state_dict(),  # samples and every declared per-slot field
            "replay": None if self.replay is None else self.replay.state_dict(),
            "update": None if self.update_policy is None else self.update_policy.state_dict(),
            "plugin": self.plugin.state_dict(),
        }

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        """The weights, then the memory, the policies, the plugin and the counters: a seam's
        ``load_state_dict`` gets the restored learner (Lightning loads the weights after this hook)."""
        self.load_state_dict(checkpoint["state_dict"])
        state = checkpoint["continual"]
        for key, value in state["learner"].items():
            setattr(self, key, value)
        self.memory.load_state_dict(state["memory"])
        if self.replay is not None:
            self.replay.load_state_dict(state["replay"], self)
        if self.update_policy is not None:
            self.update_policy.load_state_dict(state["update"], self)
        self.plugin.load_state_dict(state["plugin"], self)

    def on_train_end(self) -> None:
        """Task end: Lightning runs this before ``on_fit_end``, so the update policy's
        task-end work (herding) and then the plugin's (Fisher, anchors, ...) are done
        before the row of R is measured."""
        if self.update_policy is not None and self.plugin.uses_memory:
            self.update_policy.on_task_end(self.memory, self)
        self.plugin.on_task_end(self, self.current_task, self.trainer.datamodule)
