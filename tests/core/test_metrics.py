"""Acc / Forget / BWT / FWT on hand-made matrices (PROTOCOL section 5)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from clsuite.core.metrics import (
    all_metrics,
    average_accuracy,
    backward_transfer,
    forgetting,
    forward_transfer,
    task_il_metrics,
)

# R[i, j]: accuracy on task j after training task i (T = 3)
R = np.array(
    [
        [90.0, 10.0, 0.0],
        [60.0, 80.0, 5.0],
        [70.0, 50.0, 95.0],
    ]
)
b = np.array([12.0, 4.0, 8.0])


def test_acc_is_mean_of_last_row():
    assert average_accuracy(R) == pytest.approx((70 + 50 + 95) / 3)


def test_forgetting_uses_best_earlier_accuracy():
    # task 0: best before the end max(90, 60) = 90 -> 90 - 70 = 20; task 1: max(80) - 50 = 30
    assert forgetting(R) == pytest.approx((20 + 30) / 2)


def test_forgetting_takes_max_not_diagonal():
    R2 = np.array([[50.0, 0.0, 0.0], [80.0, 60.0, 0.0], [40.0, 60.0, 90.0]])
    # task 0 peaked at 80 after task 1 (not at its diagonal 50)
    assert forgetting(R2) == pytest.approx(((80 - 40) + (60 - 60)) / 2)
    assert backward_transfer(R2) == pytest.approx(((40 - 50) + (60 - 60)) / 2)


def test_bwt_against_diagonal():
    assert backward_transfer(R) == pytest.approx(((70 - 90) + (50 - 80)) / 2)


def test_fwt_is_gem_definition_above_diagonal_minus_b():
    # FWT = mean_{j>=1} R[j-1, j] - b[j]: (10 - 4) and (5 - 8)
    assert forward_transfer(R, b) == pytest.approx(((10 - 4) + (5 - 8)) / 2)


def test_fwt_in_class_il_is_minus_mean_b():
    # class-IL: an unseen class is never predicted, so R[j-1, j] = 0 and FWT = -mean(b[1:])
    Rc = np.tril(np.full((4, 4), 70.0))
    bc = np.array([3.0, 9.0, 1.0, 6.0])
    assert forward_transfer(Rc, bc) == pytest.approx(-(9 + 1 + 6) / 3)


def test_all_metrics_and_joint_row():
    m = all_metrics(R, b)
    assert set(m) == {"acc", "forget", "bwt", "fwt"}
    joint = all_metrics(np.array([[90.0, 80.0, 70.0]]))
    assert joint["acc"] == pytest.approx(80.0)
    assert all(math.isnan(joint[k]) for k in ("forget", "bwt", "fwt"))


def test_non_square_rejected():
    with pytest.raises(ValueError, match="square"):
        forgetting(np.zeros((2, 3)))


# -- awkward matrices (issue 11): rises, falls, a final row above the earlier maximum ---------
# T = 4. Task 0 falls (80 -> 60), rises after it was learned (90) and ends above every earlier
# row (95); task 1 falls; task 2 falls hard. Entries above the diagonal are non-zero (task-IL-like).
R4 = np.array(
    [
        [80.0, 55.0, 20.0, 15.0],
        [60.0, 70.0, 45.0, 25.0],
        [90.0, 50.0, 85.0, 52.0],
        [95.0, 40.0, 30.0, 75.0],
    ]
)
b4 = np.array([10.0, 20.0, 30.0, 40.0])


def test_forgetting_max_is_over_rows_before_the_last_only():
    # max_{l<3}: task 0 -> 90 (not the final 95), task 1 -> 70, task 2 -> 85
    # (90 - 95) + (70 - 40) + (85 - 30) = -5 + 30 + 55; a max over every row would give 0 for task 0
    assert forgetting(R4) == pytest.approx(80 / 3)
    assert forgetting(R4) != pytest.approx(85 / 3)


def test_forgetting_ignores_the_last_column_and_bwt_uses_the_diagonal():
    # the last task has no forgetting: a huge R[0, 3] must not matter
    R = R4.copy()
    R[0, 3] = 99.0
    assert forgetting(R) == pytest.approx(80 / 3)
    # BWT: (95 - 80) + (40 - 70) + (30 - 85) = 15 - 30 - 55
    assert backward_transfer(R4) == pytest.approx(-70 / 3)


def test_awkward_matrix_acc_and_fwt():
    assert average_accuracy(R4) == pytest.approx((95 + 40 + 30 + 75) / 4)
    # FWT: R[0,1] - b1, R[1,2] - b2, R[2,3] - b3 = 35 + 15 + 12
    assert forward_transfer(R4, b4) == pytest.approx(62 / 3)
    m = all_metrics(R4, b4)
    assert m == pytest.approx({"acc": 60.0, "forget": 80 / 3, "bwt": -70 / 3, "fwt": 62 / 3})


def test_forgetting_of_a_task_that_only_improves_is_negative():
    R = np.array([[50.0, 0.0], [70.0, 90.0]])
    assert forgetting(R) == pytest.approx(-20.0)  # max_{l<1} R[l, 0] = 50, not max(50, 70)
    assert backward_transfer(R) == pytest.approx(20.0)


def test_nan_rows_propagate_instead_of_being_skipped():
    # a missing measurement (NaN row, e.g. a diverged run) must not be silently averaged away
    R = R4.copy()
    R[1] = np.nan
    assert math.isnan(forgetting(R)) and math.isnan(backward_transfer(R))  # R[1, 1] and R[1, 0] are NaN
    assert average_accuracy(R) == pytest.approx(60.0)  # the final row is intact
    R[1] = R4[1]
    R[3] = np.nan
    m = all_metrics(R, b4)
    assert all(math.isnan(m[k]) for k in ("acc", "forget", "bwt"))
    assert m["fwt"] == pytest.approx(62 / 3)  # FWT reads rows 0..T-2 only


def test_single_task_and_joint_rows():
    one = all_metrics(np.array([[64.0]]), np.array([9.0]))
    assert one["acc"] == 64.0 and all(math.isnan(one[k]) for k in ("forget", "bwt", "fwt"))
    # Joint: one final row (1 x T), with b given: only Acc is defined
    joint = all_metrics(R4[-1:], b4)
    assert joint["acc"] == pytest.approx(60.0)
    assert all(math.isnan(joint[k]) for k in ("forget", "bwt", "fwt"))


def test_two_tasks_and_missing_b():
    R2 = np.array([[80.0, 30.0], [60.0, 90.0]])
    assert forward_transfer(R2, np.array([5.0, 10.0])) == pytest.approx(20.0)  # T = 2: one term, R[0, 1] - b[1]
    assert forgetting(R2) == pytest.approx(20.0) and backward_transfer(R2) == pytest.approx(-20.0)
    m = all_metrics(R4)  # no b: FWT undefined, the others still computed
    assert math.isnan(m["fwt"]) and m["acc"] == pytest.approx(60.0) and m["forget"] == pytest.approx(80 / 3)


def test_task_il_metrics_are_acc_forget_bwt_of_the_task_il_matrix():
    """The task-IL matrix (each task's logits masked to its classes) under the same definitions,
    keyed apart from class-IL's; no FWT (it would need b under the mask)."""
    Rt = [[99.0, 50.0, 48.0], [97.0, 98.0, 51.0], [95.0, 96.0, 99.0]]
    assert task_il_metrics(Rt) == {
        "acc_task_il": (95 + 96 + 99) / 3,
        "forget_task_il": ((99 - 95) + (98 - 96)) / 2,
        "bwt_task_il": ((95 - 99) + (96 - 98)) / 2,
    }
    joint = task_il_metrics([[90.0, 80.0]])  # Joint: its one final row
    assert joint["acc_task_il"] == 85.0 and math.isnan(joint["forget_task_il"]) and math.isnan(joint["bwt_task_il"])
