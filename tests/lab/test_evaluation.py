"""``clsuite eval RUN``: a finished run's saved model evaluated again, and every refusal."""

from __future__ import annotations

import os
import shutil

import pytest

from clsuite import api, commands
from clsuite.config import schema
from clsuite.run.experiment import format_report

FAST = ["benchmark=synthetic", "logger=none", "trainer=cpu", "trainer.progress_bar=false", "trainer.threads=1"]
TINY = ["benchmark.n_tasks=2", "benchmark.synthetic.num_classes=4", "benchmark.train_per_class=20"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two finished runs that kept their weights (seeds 0 and 1), and their results."""
    root = tmp_path_factory.mktemp("runs")
    out = {}
    for seed in (0, 1):
        over = [*FAST, *TINY, "method=icarl", f"seed={seed}", "keep_weights=true", "benchmark.synthetic.noise=0.9"]
        out[seed] = (root / f"seed{seed}", api.run(over, root / f"seed{seed}"))
    return out


def clsuite(*argv, capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as e:
        commands.main(list(map(str, argv)))
    got = capsys.readouterr()
    return e.value.code, got.out, got.err


def test_eval_prints_every_tasks_class_il_and_task_il_accuracy_the_runs_own(runs, capsys):
    """The run's own last rows of R and R_task_il, bit for bit, from its folder or (as
    lightning-hydra-template's eval.py) from ckpt_path=<its model.ckpt>."""
    folder, res = runs[0]
    R, Rt = res["R"][-1], res["R_task_il"][-1]
    assert Rt != R  # the noisy stream: the two readings differ
    for target in (folder, f"ckpt_path={folder / 'model.ckpt'}"):
        code, out, err = clsuite("eval", target, capsys=capsys)
        lines = out.splitlines()
        assert code == 0 and err == ""
        assert lines[0] == (
            f"icarl on synthetic: M=100 per class (400 slots), seed=0, reading=mir_code; {folder / 'model.ckpt'} on "
            "the test split (cpu)"
        )
        assert lines[0].startswith(format_report(res).splitlines()[0] + ";")  # the run's own wording of M
        assert lines[1] == "task  class-IL   task-IL   run's R  run's R_task_il"
        assert lines[2] == f"   1  {R[0]:8.2f}  {Rt[0]:8.2f}  {R[0]:8.2f}  {Rt[0]:15.2f}"
        acc, acc_t = res["metrics"]["acc"], res["metrics"]["acc_task_il"]
        assert lines[4] == f" Acc  {acc:8.2f}  {acc_t:8.2f}  {acc:8.2f}  {acc_t:15.2f}"
        assert lines[5] == "the run's last rows (results.json): the same, bit for bit"


def move_the_last_bits(monkeypatch) -> None:
    """The class-IL accuracies, each off by 1e-12 (what another machine may give)."""
    from clsuite.core import callbacks

    real = callbacks.evaluate

    def last_bit_off(*args, **kwargs):
        accs, per_class, task_il = real(*args, **kwargs)
        return [a + 1e-12 for a in accs], per_class, task_il

    monkeypatch.setattr(callbacks, "evaluate", last_bit_off)


def test_eval_says_when_the_accuracies_are_not_the_runs_bit_for_bit(runs, capsys, monkeypatch):
    """On another machine the last bits may move: said, not hidden (exit 0)."""
    move_the_last_bits(monkeypatch)
    code, out, _ = clsuite("eval", runs[0][0], capsys=capsys)
    assert code == 0 and out.splitlines()[-1] == (
        "the run's last rows (results.json): not the same bit for bit (kernels, threads or device other than the "
        "run's: docs/notes/NUMERICS.md)"
    )


def test_eval_refuses_with_one_line_what_it_cannot_evaluate(runs, tmp_path, capsys, monkeypatch):
    folder, _ = runs[0]
    no_weights = tmp_path / "no_weights"
    shutil.copytree(folder, no_weights)
    (no_weights / "model.ckpt").unlink()
    other = tmp_path / "other_weights"
    shutil.copytree(folder, other)
    for name in ("model.ckpt", "model.ckpt.sha256"):
        shutil.copy(runs[1][0] / name, other / name)
    swapped = tmp_path / "swapped_weights"  # another run's intact model.ckpt, without its digest: not "corrupt"
    shutil.copytree(folder, swapped)
    shutil.copy(runs[1][0] / "model.ckpt", swapped / "model.ckpt")
    fifo, folder_ckpt = tmp_path / "fifo", tmp_path / "folder_ckpt"  # never opened (a FIFO would hang the read)
    for where in (fifo, folder_ckpt):
        shutil.copytree(folder, where)
        (where / "model.ckpt").unlink()
    os.mkfifo(fifo / "model.ckpt")
    (folder_ckpt / "model.ckpt").mkdir()
    theirs, ours = runs[1][1]["identity"]["key"][:12], runs[0][1]["identity"]["key"][:12]
    cases = [
        ((tmp_path / "empty",), f"{tmp_path / 'empty'} holds no finished run (results.json: missing); valid: a run "
                                "or sweep job folder, or its model.ckpt"),
        ((no_weights,), f"{no_weights} holds no saved weights (model.ckpt is missing); a run keeps them with "
                        "keep_weights=true"),
        ((other,), f"{other / 'model.ckpt'} belongs to another run (identity {theirs}, this run's is {ours})"),
        ((swapped,), f"{swapped / 'model.ckpt'} belongs to another run (identity {theirs}, this run's is {ours})"),
        ((fifo,), f"{fifo} holds no saved weights (model.ckpt is a FIFO, not a file); a run keeps them with "
                  "keep_weights=true"),
        (("ckpt_path=" + str(fifo / "model.ckpt"),), f"{fifo} holds no saved weights (model.ckpt is a FIFO, not a "
                                                     "file); a run keeps them with keep_weights=true"),
        ((folder_ckpt,), f"{folder_ckpt} holds no saved weights (model.ckpt is a folder, not a file); a run keeps "
                         "them with keep_weights=true"),
        ((folder, "--split", "val"), f"{folder}'s run has no validation split (data.val_fraction=0); valid: --split test"),
    ]  # fmt: skip
    for argv, line in cases:
        assert clsuite("eval", *argv, capsys=capsys) == (2, "", f"error: {line}\n"), argv
    monkeypatch.setattr(
        "clsuite.run.identity.data_identity", lambda cfg, source=None: {"files": {"MNIST/raw/x.gz": None}}
    )
    assert clsuite("eval", folder, capsys=capsys)[2] == (
        f"error: the data files under {runs[0][1]['config']['data']['root']} are not the run's (MNIST/raw/x.gz differ "
        "or are missing); --data-root names the folder that holds them\n"
    )
    monkeypatch.setattr("clsuite.run.identity.code_part", lambda config: {"hash": "0" * 16})  # a later commit
    monkeypatch.setitem(schema.KEYS, "memory", schema.Whole(101, None, "M"))  # that refuses the run's M=100
    assert clsuite("eval", folder, capsys=capsys) == (
        2,
        "",
        "error: the code at hand cannot build the run's config: memory must be a whole number >= 101, got 100 "
        f"(code {'0' * 16} here, code {runs[0][1]['identity']['code']['hash']} in the run)\n",
    )


def test_eval_under_other_code_warns_naming_both_and_says_whether_the_rows_held(runs, capsys, monkeypatch):
    """A later commit (identity.code differs) was refused: evaluating a saved model after a change that
    moved no number is a normal need. One warning line naming both code parts; the rows, compared."""
    folder, res = runs[0]
    monkeypatch.setattr("clsuite.run.identity.code_part", lambda config: {"hash": "0" * 16, "outside": {"mine": "ab"}})
    code, out, err = clsuite("eval", folder, capsys=capsys)
    assert code == 0 and err == (
        f"warning: the code at hand is not the run's (code {'0' * 16} + mine ab here, code "
        f"{res['identity']['code']['hash']} in the run); evaluated anyway\n"
    )
    assert out.splitlines()[-1] == (
        "the run's last rows (results.json): the same, bit for bit (under code other than the run's)"
    )
    move_the_last_bits(monkeypatch)
    assert clsuite("eval", folder, capsys=capsys)[1].splitlines()[-1] == (
        "the run's last rows (results.json): not the same bit for bit (code, kernels, threads or device other than "
        "the run's: docs/notes/NUMERICS.md)"
    )
