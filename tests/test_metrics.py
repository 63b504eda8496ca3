"""Acc / Forget / BWT / FWT on hand-made matrices (PROTOCOL section 5)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from clsuite.metrics import all_metrics, average_accuracy, backward_transfer, forgetting, forward_transfer

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
