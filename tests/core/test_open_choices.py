"""The AdaER paper's open choices (issue 19), each a config key, each with a test that fails when
the key is ignored: exact values on small tensors, expected values from hand formulas.

- C-CMR scores as MIR does, with the reading's ``compare_to_old_logits`` (one scoring function);
- C-CMR ``R_t_from``: candidates (C - R_e) | memory (M - R_e);
- E-BRS ``victim``: lowest_score (Alg. 2) | random slot of the most frequent class;
- E-BRS ``unscored``: the stored s(m) of a sample never scored: 0 | inf | insertion;
- A-GEM's own reference-batch size ``method.replay_size``;
- ``logits_on_overwrite``: the stored logits of an overwritten slot, reset to 0 | kept (MIR's code);
- a bad value of each new key: one ``error:`` line, exit 2.
"""

from __future__ import annotations

import copy
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from clsuite.commands import main
from clsuite.config.check import ConfigError, validate
from clsuite.core.memory.buffer import Memory
from clsuite.core.memory.ebrs import EBRS
from clsuite.core.replay import ccmr
from clsuite.core.replay.ccmr import CCMRReplay
from clsuite.core.replay.mir import MIRReplay
from clsuite.core.train import build
from tests.conftest import make_cfg, run_cfg
from tests.core.test_options import D, ce_per_sample, toy_batch, toy_learner, toy_memory

ROOT = Path(__file__).resolve().parents[2]
LR = 0.5


def stepped(net, x, y, lr=LR):
    """A copy of ``net`` after one plain SGD step on CE(x, y): theta' (Eq. 3) by hand."""
    ref = copy.deepcopy(net)
    ref.zero_grad()
    F.cross_entropy(ref(x), y).backward()
    with torch.no_grad():
        for p in ref.parameters():
            p -= lr * p.grad
    return ref


# -- C-CMR follows compare_to_old_logits exactly as MIR ------------------------------------------
def stored_logits(mem):
    """Slots 0 and 3 stored confidently right (old loss ~ 0, below the current loss), slot 1
    confidently wrong (old loss ~ 20), the others never stored (0: loss log 6)."""
    n = mem.size
    logits = torch.zeros(n, 6)
    logits[0, mem.y[0]] = logits[3, mem.y[3]] = 20.0
    logits[1, (mem.y[1] + 1) % 6] = 20.0
    return logits


@pytest.mark.parametrize("flag", [False, True])
def test_ccmr_scores_against_stored_logits_and_stores_the_better_ones(flag):
    mem = toy_memory([0, 0, 0, 1, 1, 1])
    mem.logits[:6] = stored_logits(mem)
    learner = toy_learner(memory=mem, lr=LR)
    x, y, t = toy_batch(task=2, n=3)
    R = CCMRReplay(tau=1.0, compare_to_old_logits=flag).select(learner, x, y, t, 2)

    mx, my = mem.x[:6], mem.y[:6]
    net2 = stepped(learner.net, x, y)
    with torch.no_grad():
        pre = ce_per_sample(learner.net, mx, my)
        post = ce_per_sample(net2, mx, my)
        old = torch.stack([-torch.log_softmax(stored_logits(mem)[i], 0)[my[i]] for i in range(6)])
        expected = post - (torch.minimum(pre, old) if flag else pre)
        better = (pre < old) & flag
        expected_logits = torch.where(better[:, None], learner.net(mx), stored_logits(mem))
    assert (old < pre).any() and (pre < old).any()  # the stored logits move some scores, are replaced for others
    torch.testing.assert_close(mem.score[:6], expected, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(mem.logits[:6], expected_logits, rtol=1e-5, atol=1e-6)
    assert sorted(R.tolist()) == sorted(expected.topk(2).indices.tolist())


@pytest.mark.parametrize("flag", [False, True])
def test_mir_and_ccmr_share_one_scoring(flag):
    """All of M scored by both policies from the same state: the same scores, the same stored logits."""
    out = []
    for policy in (MIRReplay(candidates=50, compare_to_old_logits=flag), CCMRReplay(compare_to_old_logits=flag)):
        mem = toy_memory([0, 0, 0, 1, 1, 1])
        mem.logits[:6] = stored_logits(mem)
        learner = toy_learner(memory=mem, lr=LR)
        policy.select(learner, *toy_batch(task=2, n=3), 2)
        out.append((mem.score[:6].clone(), mem.logits[:6].clone()))
    assert torch.equal(out[0][0], out[1][0]) and torch.equal(out[0][1], out[1][1])


@pytest.mark.parametrize("reading, old", [("paper_text", False), ("mir_code", True)])
@pytest.mark.parametrize("method", ["adaer", "ccmr"])
def test_ccmr_takes_the_readings_compare_to_old_logits(reading, old, method):
    _, learner, _ = build(make_cfg(f"reading={reading}", f"method={method}"))
    assert learner.replay.compare_to_old_logits is old
    _, learner, _ = build(make_cfg(f"reading={reading}", f"method={method}", f"compare_to_old_logits={not old}"))
    assert learner.replay.compare_to_old_logits is (not old)


# -- C-CMR R_t_from: C - R_e | M - R_e -------------------------------------------------------------
TASKS8 = [0, 0, 0, 1, 1, 1, 2, 2]
SCORES8 = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 9.0, 8.0])


@pytest.mark.parametrize("R_t_from", ["candidates", "memory"])
def test_R_t_from(monkeypatch, R_t_from):
    """C = 3 candidates of the past tasks 0-1, |R| = 2, tau = 0.5: R_e = the best candidate, R_t one
    slot of R_e's task (q_j = q) where one is left. candidates: R_t is drawn from the other two
    candidates (C - R_e), of R_e's task when one of them is. memory: from M - R_e (past tasks
    only), always of R_e's task (it has 2 slots left there), found outside the candidates in some
    draws."""
    pools = []

    def fake(learner, x, y, t, slots, compare_to_old_logits=False, updates_bn=False):
        pools.append(slots.clone())
        return SCORES8[slots]

    monkeypatch.setattr(ccmr, "score_slots", fake)
    learner = toy_learner(memory=toy_memory(TASKS8))
    learner.current_task = 2
    policy = CCMRReplay(tau=0.5, candidates=3, exclude_current_task=True, R_t_from=R_t_from)
    outside = 0
    for seed in range(30):
        torch.manual_seed(seed)
        R_e, R_t = policy.select(learner, None, None, None, 2).tolist()
        pool = pools[-1].tolist()
        assert R_e == max(pool, key=lambda i: SCORES8[i]) and R_t != R_e and TASKS8[R_t] != 2
        same_task_left = [i for i in pool if i != R_e and TASKS8[i] == TASKS8[R_e]]
        if R_t_from == "candidates":
            assert R_t in pool and (TASKS8[R_t] == TASKS8[R_e] or not same_task_left)
        else:
            assert TASKS8[R_t] == TASKS8[R_e]
        outside += R_t not in pool
    assert outside > 0 if R_t_from == "memory" else outside == 0


def test_R_t_from_is_moot_when_all_of_M_is_scored(monkeypatch):
    monkeypatch.setattr(ccmr, "score_slots", lambda learner, x, y, t, slots, *a: SCORES8[slots])
    learner = toy_learner(memory=toy_memory(TASKS8))
    got = []
    for R_t_from in ("candidates", "memory"):
        torch.manual_seed(0)
        got.append(CCMRReplay(tau=0.5, R_t_from=R_t_from).select(learner, None, None, None, 4).tolist())
    assert got[0] == got[1]


# -- E-BRS victim: lowest_score | random ------------------------------------------------------------
def filled(labels, scores, classes=10):
    n = len(labels)
    mem = Memory(n, (1,), classes)
    mem.append(torch.arange(n, dtype=torch.float32)[:, None], torch.tensor(labels), torch.zeros(n, dtype=torch.long))
    mem.score[:n] = torch.tensor(scores, dtype=torch.float32)
    mem.seen = n
    return mem


def accept_all(monkeypatch):
    monkeypatch.setattr(
        "clsuite.core.memory.reservoir.reservoir_slots", lambda seen, n, cap, dev: torch.zeros(n, dtype=torch.long)
    )


@pytest.mark.parametrize("victim, expected", [("lowest_score", {4}), ("random", {1, 3, 4})])
def test_ebrs_victim(victim, expected):
    mem = filled([1, 3, 2, 3, 3, 1], [0.0, 5.0, -9.0, 1.0, -2.0, -7.0])  # class 3: slots 1, 3, 4
    torch.manual_seed(0)
    assert {EBRS(victim=victim).victim(mem, mem.class_counts()) for _ in range(60)} == expected


# -- E-BRS unscored: 0 | inf | insertion --------------------------------------------------------------
@pytest.mark.parametrize(
    "unscored, x_after, score_after",
    [
        (0, [20.0, 1.0, 2.0], [0.0, 0.7, 0.0]),  # A enters with 0, so B evicts A
        ("inf", [10.0, 20.0, 2.0], [math.inf, math.inf, 0.0]),  # A enters unscored (inf): B evicts slot 1 (0.7)
        (math.inf, [10.0, 20.0, 2.0], [math.inf, math.inf, 0.0]),  # `unscored=inf` on the command line
    ],
)
def test_ebrs_unscored_placement(monkeypatch, unscored, x_after, score_after):
    """Class 3 most frequent; A (class 3) replaces slot 0 (score 0.5), then B (class 3)."""
    mem = filled([3, 3, 1], [0.5, 0.7, 0.0])
    accept_all(monkeypatch)
    EBRS(unscored=unscored).update(mem, torch.tensor([[10.0], [20.0]]), torch.tensor([3, 3]), torch.tensor([1, 1]))
    assert mem.x[:, 0].tolist() == x_after
    assert torch.equal(mem.score, torch.tensor(score_after))


def test_ebrs_unscored_inf_on_appended_slots():
    mem = Memory(4, (1,), 5)
    EBRS(unscored="inf").update(mem, torch.ones(3, 1), torch.tensor([0, 1, 2]), torch.zeros(3, dtype=torch.long))
    assert mem.score.tolist() == [math.inf] * 3 + [0.0]
    mem = Memory(4, (1,), 5)
    EBRS().update(mem, torch.ones(3, 1), torch.tensor([0, 1, 2]), torch.zeros(3, dtype=torch.long))
    assert mem.score.tolist() == [0.0] * 4


@pytest.mark.parametrize("flag", [False, True])
def test_ebrs_unscored_insertion(monkeypatch, flag):
    """Two slots filled, then a batch of 3 (task 2): 2 are appended and the 3rd replaces a slot of
    the most frequent class. Each written sample's score is s at insertion: theta = the network
    now, theta' = one step on the batch itself; under compare_to_old_logits against min(l, log 6)."""
    learner = toy_learner(memory=Memory(4, (D,), 6), replay=CCMRReplay(compare_to_old_logits=flag), lr=LR)
    with torch.no_grad():
        learner.net.head.weight.mul_(8.0)  # spread the logits: some losses above log 6
    mem = learner.memory
    mem.append(torch.zeros(2, D), torch.tensor([4, 1]), torch.tensor([0, 0]))
    mem.score[:2] = torch.tensor([-9.0, -0.2])
    mem.seen = 2
    x, y, t = toy_batch(task=2, n=3)  # labels 4, 5, 5
    accept_all(monkeypatch)
    EBRS(unscored="insertion").update(mem, x, y, t, learner)

    net2 = stepped(learner.net, x, y)
    with torch.no_grad():
        pre = ce_per_sample(learner.net, x, y)
        post = ce_per_sample(net2, x, y)
        s = post - (torch.clamp(pre, max=math.log(6)) if flag else pre)
    assert (pre > math.log(6)).any() and (pre < math.log(6)).any()
    # memory [4, 1, 4, 5] after the appends: class 4 most frequent, slots 0 (-9) and 2 (s[0])
    victim = 2 if s[0] < -9.0 else 0
    expected = [-9.0, -0.2, float(s[0]), float(s[1])]
    expected[victim] = float(s[2])
    torch.testing.assert_close(mem.score, torch.tensor(expected), rtol=1e-5, atol=1e-6)
    assert torch.equal(mem.x[victim], x[2]) and (mem.logits == 0).all()  # nothing stored at insertion


def test_ebrs_unscored_insertion_needs_the_learner():
    with pytest.raises(ValueError, match="insertion"):
        EBRS(unscored="insertion").update(Memory(2, (1,), 2), torch.ones(1, 1), torch.tensor([0]), torch.tensor([0]))


@pytest.mark.parametrize("bad", [{"victim": "oldest"}, {"unscored": 2}, {"unscored": True}])
def test_ebrs_rejects_unknown_values(bad):
    with pytest.raises(ValueError, match="valid choices"):
        EBRS(**bad)


# -- A-GEM's own reference batch ---------------------------------------------------------------------
@pytest.mark.parametrize("reading", ["paper_text", "mir_code"])
@pytest.mark.parametrize(
    "override, size", [([], 256), (["method.replay_size=7"], 7), (["method.replay_size=null"], None)]
)
def test_agem_reference_batch_size(reading, override, size):
    """|R| of g_ref is A-GEM's own 256 under every reading; the batch drawn has that many past-task slots."""
    cfg = make_cfg(f"reading={reading}", "method=agem", "memory=300", "memory_per_class=false", *override)
    _, learner, _ = build(cfg)
    size = int(cfg.replay_size) if size is None else size
    assert learner.replay_size == size
    mem = learner.memory
    mem.append(torch.zeros(300, *mem.x.shape[1:]), torch.arange(300) % 2, torch.tensor([0] * 280 + [1] * 20))
    learner.current_task = 1
    idx = learner.select_replay(None, None, None)
    assert len(idx) == len(set(idx.tolist())) == size and (mem.t[idx] == 0).all()


# -- logits_on_overwrite: the stored logits of an overwritten slot, reset (0) | keep (MIR's code) ------
@pytest.mark.parametrize("rule", ["reset", "keep"])
@pytest.mark.parametrize("write", ["replace", "place"])
def test_an_overwritten_slot_resets_or_keeps_its_stored_logits(rule, write):
    """Slots 0-2 store logits; a new sample overwrites slot 1 (reservoir: ``place``; E-BRS, rings:
    ``replace``): reset -> 0, keep -> the previous occupant's. The other slots and a slot filled
    for the first time (``append``: 0 under both, as MIR's zeros at creation) are untouched."""
    mem = Memory(4, (1,), 3, logits_on_overwrite=rule)
    mem.append(torch.zeros(3, 1), torch.tensor([0, 1, 2]), torch.zeros(3, dtype=torch.long))
    old = torch.tensor([[5.0, 0.0, 0.0], [0.0, 5.0, 0.0], [0.0, 0.0, 5.0]])
    mem.logits[:3] = old
    x, y, t = torch.ones(1, 1), torch.tensor([2]), torch.ones(1, dtype=torch.long)
    if write == "replace":
        mem.replace(torch.tensor([1]), x, y, t)
    else:
        mem.place(torch.tensor([1]), x, y, t)
    expected = old.clone()
    if rule == "reset":
        expected[1] = 0.0
    assert torch.equal(mem.logits[:3], expected) and mem.y[1] == 2 and mem.score[1] == 0.0  # the score resets
    mem.logits[3] = 7.0  # (never written by a sample: what a slot emptied and refilled might hold)
    mem.append(x, y, t)
    assert torch.equal(mem.logits[3], torch.zeros(3))


@pytest.mark.parametrize("rule", ["reset", "keep"])
def test_mir_scores_an_overwritten_slot_against_the_previous_occupants_logits_under_keep(rule):
    """Slot 0's occupant stored logits confident in class c; a new sample of class c overwrites it.
    Its first scoring: keep -> against the occupant's logits (loss ~0 for c, below the current loss:
    s = l(theta') - ~0, and they stay stored), as MIR's code computes it; reset -> against 0 logits
    (log K, above the current loss here: s = l(theta') - l(theta), the current logits stored)."""
    mem = toy_memory([0, 0, 0, 1, 1, 1])
    mem.kept = {"logits"} if rule == "keep" else set()
    new_y = mem.y[0] ^ 1  # the other class of task 0
    prev = torch.zeros(6)
    prev[new_y] = 20.0
    mem.logits[0] = prev
    mem.replace(torch.tensor([0]), mem.x[:1] + 0.5, new_y[None], mem.t[:1].clone())
    learner = toy_learner(memory=mem, lr=LR)
    x, y, t = toy_batch(task=2, n=3)
    MIRReplay(candidates=50, compare_to_old_logits=True).select(learner, x, y, t, 2)
    net2 = stepped(learner.net, x, y)
    with torch.no_grad():
        mx, my = mem.x[:1], mem.y[:1]
        pre, post = ce_per_sample(learner.net, mx, my)[0], ce_per_sample(net2, mx, my)[0]
        current = learner.net(mx)[0]
    old = -torch.log_softmax(prev if rule == "keep" else torch.zeros(6), 0)[new_y]
    assert (old < pre) == (rule == "keep")  # the two rules take different branches here
    torch.testing.assert_close(mem.score[0], post - torch.minimum(pre, old), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(mem.logits[0], prev if rule == "keep" else current, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reading, rule", [("paper_text", "reset"), ("mir_code", "reset")])
def test_logits_on_overwrite_reaches_the_memory(reading, rule):
    _, learner, _ = build(make_cfg(f"reading={reading}", "method=mir"))
    assert learner.memory.kept == ({"logits"} if rule == "keep" else set())
    other = "keep" if rule == "reset" else "reset"
    _, learner, _ = build(make_cfg(f"reading={reading}", "method=mir", f"logits_on_overwrite={other}"))
    assert learner.memory.kept == ({"logits"} if other == "keep" else set())


# -- every new key: one error line, exit 2 ------------------------------------------------------------
BAD = [
    (
        ["method=adaer", "method.replay.R_t_from=all"],
        "unknown method.replay.R_t_from 'all'; valid choices: candidates, memory",
    ),
    (
        ["method=ebrs", "method.update.victim=oldest"],
        "unknown method.update.victim 'oldest'; valid choices: lowest_score, random",
    ),
    (
        ["method=adaer", "method.update.unscored=2"],
        "unknown method.update.unscored 2; valid choices: 0, inf, insertion",
    ),
    (["method=agem", "method.replay_size=0"], "method.replay_size must be a whole number >= 1 or null, got 0"),
    (["method=mir", "logits_on_overwrite=zero"], "unknown logits_on_overwrite 'zero'; valid choices: reset, keep"),
]


@pytest.mark.parametrize("overrides, line", BAD, ids=[b[0][1].split("=")[0] for b in BAD])
def test_validate_rejects_a_bad_open_choice(overrides, line):
    with pytest.raises(ConfigError) as e:
        validate(make_cfg(*overrides))
    assert str(e.value) == line


def test_validate_accepts_every_valid_open_choice():
    for over in (
        ["method.replay.R_t_from=memory", "method.update.victim=random", "method.update.unscored=inf"],
        ["method.update.unscored=insertion"],
        ["method.update.unscored=0"],
    ):
        validate(make_cfg("method=adaer", *over))


@pytest.mark.parametrize("overrides, line", BAD, ids=[b[0][1].split("=")[0] for b in BAD])
def test_cli_rejects_a_bad_open_choice(tmp_path, monkeypatch, capsys, overrides, line):
    """The command line in this process (``python src/run.py``'s ``main``); the first value also in its own."""
    argv = [*overrides, "benchmark=synthetic", "logger=none"]
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2 and capsys.readouterr().err.strip() == f"error: {line}"
    if overrides == BAD[0][0]:  # the same refusal from a process of its own: nothing else on stderr
        p = subprocess.run([sys.executable, str(ROOT / "src" / "run.py"), *argv], cwd=tmp_path,
                           capture_output=True, text=True, timeout=120)  # fmt: skip
        assert p.returncode == 2 and p.stderr.strip() == f"error: {line}"
    assert not list(tmp_path.rglob("results.json"))


# -- all of them together train (the update runs inside Lightning's loop) -----------------------------
def test_adaer_trains_with_every_non_default_choice(tmp_path):
    res = run_cfg(
        tmp_path,
        "reading=mir_code",
        "method=adaer",
        "benchmark.n_tasks=3",
        "benchmark.train_per_class=20",
        "memory=5",
        "method.replay.R_t_from=memory",
        "method.update.victim=random",
        "method.update.unscored=insertion",
    )
    assert np.isfinite(np.asarray(res["R"])).all()
    upd = res["config"]["method"]["update"]
    assert (upd["victim"], upd["unscored"], res["config"]["method"]["replay"]["R_t_from"]) == (
        "random",
        "insertion",
        "memory",
    )
