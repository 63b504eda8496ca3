"""Every replay method of the AdaER family trains a synthetic stream end to end."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import run_cfg


@pytest.mark.parametrize("method", ["er", "mir", "ccmr", "ebrs", "adaer"])
def test_method_trains_and_remembers(tmp_path, method):
    res = run_cfg(tmp_path, f"method={method}", "benchmark.n_tasks=2", "memory=40", "memory_per_class=false")
    R = np.asarray(res["R"])
    assert R.shape == (2, 2)
    assert res["steps_per_task"] == [20, 20]  # 200 samples per task, |B_t| = 10 (mir_code, the default)
    assert R[0, 0] > 40 and R[1, 1] > 60  # each task learned (chance over the 6-way head: 17%)
    assert R[1, 0] > 30  # replay keeps task 0 (Online drops it to 0 here)
    assert res["memory_capacity"] == 40
