"""The portable mode's promise, checked against values made on another machine: the golden runs
(``tests/golden_runs.py``) under ``trainer.numerics=portable`` give the committed R and weights
bit for bit, whatever x86-64 CPU runs this (docs/notes/NUMERICS.md says where that was checked)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import in_portable_process
from tests.golden_runs import GOLDEN


@pytest.mark.exact
@pytest.mark.pinned  # its process pins portable kernels over any level `make test` sets: one run is every run
def test_portable_runs_match_the_golden_values_bit_for_bit():
    golden = json.loads(GOLDEN.read_text())
    found = json.loads(
        in_portable_process("from tests.golden_runs import measure\nimport json\nprint(json.dumps(measure()))")
    )
    made, here = golden["made_on"]["cpu"], found["made_on"]["cpu"]
    for name, want in golden["runs"].items():
        got = found["runs"][name]
        assert got["overrides"] == want["overrides"], f"{name}: the golden run's config changed; `make golden`"
        assert (got["R"], got["weights_sha256"]) == (want["R"], want["weights_sha256"]), (
            f"{name}: portable numerics gave other numbers on {here} than on {made} (R {got['R']} vs {want['R']}). "
            "If a change moved the numbers on purpose: `make golden` and commit tests/golden/portable.json; "
            "else this machine or install computes differently: docs/notes/NUMERICS.md"
        )
