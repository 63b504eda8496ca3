"""trainer.numerics (clsuite.config.numerics): portable pins the kernels whatever the machine would pick,
says so in the identity and the summary, and is refused where it cannot hold."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from clsuite.config import numerics
from clsuite.config.check import ConfigError
from clsuite.run import identity as ident
from tests.conftest import ROOT, expected_identity, in_portable_process, make_cfg


def test_portable_pins_every_library_even_against_the_environment(monkeypatch):
    """The machine's own choices (here forced to others through the variables a user may set) are
    overridden: ATen, MKL, oneDNN and NNPACK all report the pinned kernels."""
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")
    monkeypatch.setenv("MKL_CBWR", "AVX2")
    found = json.loads(
        in_portable_process(
            "import json\nfrom clsuite.config.numerics import in_effect\nprint(json.dumps(in_effect()))"
        )
    )
    assert {k: found[k] for k in numerics.PORTABLE} == numerics.PORTABLE
    assert found["mode"] == "portable"


def test_native_leaves_the_machine_its_choice():
    code = "from clsuite.config.numerics import apply, in_effect\napply('native')\nimport json\nprint(json.dumps(in_effect()))"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE"}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    found = json.loads(p.stdout)
    # the user's own variables are honoured and recorded; nothing is switched off
    assert (found["mode"], found["aten"], found["mkl"], found["mkldnn"]) == ("native", "DEFAULT", "COMPATIBLE", True)


def test_portable_is_refused_in_a_process_whose_kernels_are_chosen(monkeypatch):
    """This test process has computed with its own kernels: portable cannot hold here."""
    monkeypatch.setattr(numerics, "_MODE", ["native"])
    with pytest.raises(ConfigError, match=r"trainer.numerics=portable in a process that already ran with"):
        numerics.apply("portable")
    found = dict(numerics.in_effect(), mkl="auto AVX2", aten="AVX2")  # what a process with chosen kernels reports
    with pytest.raises(ConfigError, match=r"^trainer.numerics=portable is not in effect in this process: aten AVX2"):
        numerics.check("portable", found)
    assert numerics.check("native", found) is found
    with pytest.raises(ConfigError, match=r"unknown trainer\.numerics 'fast'; valid choices: native, portable"):
        numerics.apply("fast")


def test_the_kernels_are_part_of_the_identity_and_named_when_they_differ():
    base = {"config": {}, "code": {"hash": "c"}, "data": {"files": {}}}
    env = {"torch_threads": 1, "blas_threads": 1, "device_type": "cpu", "torch": "2.13.0+cpu"}
    amd = dict(env, numerics={"mode": "native", "aten": "AVX2", "mkl": "auto AUTO", "mkldnn": True, "nnpack": True})
    intel = dict(
        env, numerics={"mode": "native", "aten": "AVX512", "mkl": "auto AVX512_E1", "mkldnn": True, "nnpack": True}
    )
    a, b = ({**base, "env": e} for e in (amd, intel))
    a["key"], b["key"] = (ident.sha256(ident.canonical(x)) for x in (a, b))
    assert a["key"] != b["key"]
    assert [r for r, _ in ident.differences(a, b)] == ["numerics"]
    portable = dict(numerics.PORTABLE, mode="portable")
    assert numerics.summary(portable) == "portable (ATen DEFAULT, MKL COMPATIBLE, oneDNN off)"
    on_gpu = numerics.summary(portable, "cuda:0")
    assert on_gpu.startswith("portable (ATen DEFAULT") and "computes on cuda:0: its arithmetic is the GPU's" in on_gpu


def test_a_run_records_and_prints_its_numerics(run):
    res = run("seed=0")
    found = res["identity"]["env"]["numerics"]
    assert found["mode"] == "native" and found["aten"] and found["mkldnn"] is True
    from clsuite.run.experiment import format_report

    assert f"numerics: {numerics.summary(found)}" in format_report(res).splitlines()[1]


def test_a_sweep_takes_one_numerics(tmp_path):
    from tests.lab.test_sweeps import run_sweep

    p = run_sweep(tmp_path, "trainer.numerics=native,portable", "seed=0")
    assert p.returncode == 2
    assert p.stderr.strip().splitlines()[-1].startswith("error: trainer.numerics takes one value per sweep")
    assert not list(tmp_path.rglob("grid.json"))


def test_joblib_workers_run_portable_kernels(tmp_path):
    """Each job pins its own process's kernels: loky workers too (and submitit's, by the same code)."""
    from tests.lab.test_sweeps import run_sweep

    p = run_sweep(
        tmp_path, "launcher=joblib", "hydra.launcher.n_jobs=2", "method=er,adaer", "seed=0", "trainer.numerics=portable"
    )
    assert p.returncode == 0, p.stderr[-2000:]
    found = [json.loads(f.read_text())["identity"]["env"]["numerics"] for f in tmp_path.rglob("results.json")]
    assert len(found) == 2 and all({k: f[k] for k in numerics.PORTABLE} == numerics.PORTABLE for f in found)


# ----------------------------------------------------------------------------- the environment


def _clean(monkeypatch):
    """This process's environment without any kernel variable (a caller's own are not the test's)."""
    for k in [k for k in os.environ if k.startswith(numerics.KERNEL_ENV)]:
        monkeypatch.delenv(k)


def test_native_records_the_kernel_variables_and_a_run_under_one_is_another_run(monkeypatch):
    """ONEDNN_DEFAULT_FPMATH_MODE=BF16 moves every convolution's result: it is in env.numerics, its
    key is another one, the difference is named, and the summary and tables say it."""
    _clean(monkeypatch)
    cfg = make_cfg("method=online")
    plain = expected_identity(cfg)
    assert "variables" not in plain["env"]["numerics"]  # a clean environment: the identity as before
    monkeypatch.setenv("ONEDNN_DEFAULT_FPMATH_MODE", "BF16")
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "SSE41")
    bf16 = expected_identity(cfg)
    found = bf16["env"]["numerics"]
    assert found["variables"] == {"ONEDNN_DEFAULT_FPMATH_MODE": "BF16", "ONEDNN_MAX_CPU_ISA": "SSE41"}
    assert bf16["key"] != plain["key"] and [r for r, _ in ident.differences(bf16, plain)] == ["numerics"]
    assert numerics.label(found).endswith("; ONEDNN_DEFAULT_FPMATH_MODE=BF16, ONEDNN_MAX_CPU_ISA=SSE41)")
    assert numerics.summary(found).endswith("oneDNN on; ONEDNN_DEFAULT_FPMATH_MODE=BF16, ONEDNN_MAX_CPU_ISA=SSE41)")


@pytest.mark.parametrize(
    ("name", "value", "device", "recorded"),
    [
        ("DNNL_MAX_CPU_ISA", "SSE41", "cpu", True),  # oneDNN's older name
        ("MKLDNN_VERBOSE", "1", "cpu", False),  # a log
        ("MKL_ENABLE_INSTRUCTIONS", "AVX2", "cpu", True),
        ("MKL_CBWR", "AVX2", "cpu", True),
        ("ATEN_CPU_CAPABILITY", "avx2", "cpu", True),
        ("OMP_SCHEDULE", "dynamic", "cpu", True),
        ("OMP_NUM_THREADS", "3", "cpu", False),  # threads: pinned in every run, recorded as threads
        ("KMP_DETERMINISTIC_REDUCTION", "1", "cpu", True),
        ("GOMP_SPINCOUNT", "0", "cpu", False),
        ("OPENBLAS_CORETYPE", "Haswell", "cpu", True),
        ("NPY_DISABLE_CPU_FEATURES", "AVX512F", "cpu", True),
        ("TORCH_NEW_KNOB", "1", "cpu", True),  # a name under a library's prefix that no list knows
        ("NVIDIA_TF32_OVERRIDE", "0", "cpu", False),  # the GPU's: cannot act on a CPU run
        ("NVIDIA_TF32_OVERRIDE", "0", "cuda", True),
        ("CUBLAS_WORKSPACE_CONFIG", ":16:8", "cuda", True),
        ("CUDA_VISIBLE_DEVICES", "1", "cuda", False),
        ("HOME", "/elsewhere", "cpu", False),  # no library's
    ],
)
def test_the_rule_over_the_libraries_prefixes(monkeypatch, name, value, device, recorded):
    _clean(monkeypatch)
    monkeypatch.setenv(name, value)
    assert numerics.variables("native", device) == ({name: value} if recorded else {})


def test_portable_pins_or_refuses_each_kernel_variable(monkeypatch, tmp_path):
    """Portable sets ATen's and MKL's variables itself and turns oneDNN off: those cannot act. Any
    other kernel variable is refused with one line, before any folder is made (native records it)."""
    _clean(monkeypatch)
    for k, v in {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_DEFAULT_FPMATH_MODE": "BF16",
                 "OMP_NUM_THREADS": "2", "CUBLAS_WORKSPACE_CONFIG": ":16:8"}.items():  # fmt: skip
        monkeypatch.setenv(k, v)
    assert numerics.variables("portable") == {}
    numerics.check_environment("portable")
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")  # numpy's BLAS computes no part of a run: let be
    assert numerics.variables("portable") == {} and numerics.variables("native")["OPENBLAS_CORETYPE"] == "Haswell"
    numerics.check_environment("portable")
    assert numerics.variables("portable", "cuda") == {"CUBLAS_WORKSPACE_CONFIG": ":16:8"}  # no mode pins a GPU
    assert numerics.variables("portable", "cuda", deterministic=True) == {}  # Lightning sets it itself
    monkeypatch.setenv("MKL_ENABLE_INSTRUCTIONS", "AVX2")
    numerics.check_environment("native")  # native records it
    with pytest.raises(ConfigError, match=r"^trainer.numerics=portable cannot pin MKL_ENABLE_INSTRUCTIONS=AVX2: "):
        numerics.check_environment("portable")
    args = ["trainer.numerics=portable", "benchmark=synthetic", "logger=none"]
    p = subprocess.run(
        [sys.executable, str(ROOT / "src" / "run.py"), *args], cwd=tmp_path, capture_output=True, text=True
    )
    assert p.returncode == 2 and p.stderr.startswith("error: trainer.numerics=portable cannot pin MKL_ENABLE_INSTR")
    assert len(p.stderr.strip().splitlines()) == 1 and "use trainer.numerics=native, which records it" in p.stderr
    assert list(tmp_path.iterdir()) == []  # no folder made


def test_a_run_sets_no_kernel_variable_that_the_next_run_would_record(tmp_path):
    """The libraries set variables of their own as a run goes (threadpoolctl, joblib, Lightning: at
    import or at the fit; CUBLAS_WORKSPACE_CONFIG under trainer.deterministic): the next run of the
    same process has the identity of the first."""
    cfg = make_cfg("method=online", "trainer.deterministic=true")
    before = expected_identity(cfg)
    from clsuite.run.experiment import run_experiment

    run_experiment(cfg, tmp_path)
    assert expected_identity(cfg) == before
