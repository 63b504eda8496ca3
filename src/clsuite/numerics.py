"""Which CPU kernels do a run's arithmetic (``trainer.numerics``): pinned once per process, recorded.

The online stream turns the last bits of a float sum into points of Acc (docs/NUMERICS.md: one
seed of AdaER on split-FMNIST gives 58.5 or 73.0 with the CPU's kernels alone). Three libraries
do a run's arithmetic on the CPU and pick their kernels by the CPU they find, each with its own
switch (numpy's BLAS, which picks its kernels when numpy loads, is in no run's arithmetic: GEM's
QP products are torch's):

============  ==========================================  =======================================
library       what it picks by CPU                        ``portable`` pins it to
============  ==========================================  =======================================
ATen          vector width of element-wise ops and         ``ATEN_CPU_CAPABILITY=default``: the
              reductions (AVX-512 / AVX2 / default)        baseline x86-64 build of every kernel
oneMKL        the code branch of every matrix product      ``MKL_CBWR=COMPATIBLE``: SSE2 without
              (linear layers, convolutions' gemm)          rcpps/rsqrtps, the one branch Intel
                                                           documents for Intel *and* non-Intel CPUs
oneDNN,       convolution kernels, JIT-compiled for the    off (``torch.backends.mkldnn`` /
NNPACK        ISA and cache sizes found                    ``nnpack``): ATen's im2col + MKL gemm
============  ==========================================  =======================================

``native`` leaves every choice to the machine (fastest; a seed's R holds on this CPU model only).
``portable`` pins all three, so that the arithmetic is the same instruction sequence on any x86-64
CPU; what is left that depends on the CPU is glibc's libm (``exp``/``log`` pick an FMA variant on
CPUs with FMA and AVX2: every x86-64 server CPU since 2013 (Intel) / 2017 (AMD)) and ATen's
normal sampler (an AVX2 path on CPUs with AVX2), both documented in docs/NUMERICS.md.

Steps, in every process that trains (a single run, each sweep job of every launcher, ``api.run``):

1. :func:`apply` at the start of the run (``clsuite.experiment.run_experiment``), before the
   process's first torch computation: ``portable`` sets the variables above, which ATen and MKL
   read lazily at their first call, and turns oneDNN and NNPACK off; the process keeps that mode
   (a second mode in one process is refused: a sweep takes one value, ``clsuite.sweep.grid``);
2. :func:`in_effect` asks each library what it actually uses (never what was asked) and returns
   it for the run's identity (``env.numerics``: a result made with other kernels is another run)
   and the run summary;
3. :func:`check`: ``portable`` asked but not in effect (torch computed in this process before
   step 1: a notebook, a test process) is one ``ConfigError`` line, before any training.

On a GPU the arithmetic of the network is the GPU's; ``trainer.deterministic=true`` asks for
PyTorch's deterministic algorithms and ``CUBLAS_WORKSPACE_CONFIG`` (Lightning sets both), which
promise the same result on one GPU model, driver and library version, not across GPU models.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
from pathlib import Path

from clsuite.errors import ConfigError

MODES = ("native", "portable")
PORTABLE_ENV = {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE"}
# What in_effect() must read back in portable mode (the libraries' own names).
PORTABLE = {"aten": "DEFAULT", "mkl": "COMPATIBLE", "mkldnn": False, "nnpack": False}
# oneMKL's branch codes (mkl_cbwr_get; Intel's "Named Constants for CNR Control").
MKL_BRANCHES = {1: "OFF", 2: "AUTO", 3: "COMPATIBLE", 4: "SSE2", 6: "SSSE3", 7: "SSE4_1", 8: "SSE4_2", 9: "AVX",
                10: "AVX2", 12: "AVX512", 14: "AVX512_E1", 15: "AVX512_E2", 16: "AVX512_E3", 17: "AVX512_E4",
                18: "AVX2_E1", 19: "AVX512_E5"}  # fmt: skip
_MODE: list[str] = []  # the mode this process applied (one per process)


def apply(mode: str) -> None:
    """Step 1: pin this process's kernels for ``mode`` (before its first torch computation)."""
    if mode not in MODES:
        raise ConfigError(f"unknown trainer.numerics {mode!r}; valid choices: {', '.join(MODES)}")
    if _MODE and _MODE[0] != mode:
        raise ConfigError(
            f"trainer.numerics={mode} in a process that already ran with trainer.numerics={_MODE[0]}: "
            "the kernels are chosen once per process; run one sweep (or process) per value"
        )
    _MODE[:] = [mode]
    if mode == "portable":
        os.environ.update(PORTABLE_ENV)  # read lazily by ATen and MKL; inherited by child processes
        import torch

        torch.backends.mkldnn.enabled = False
        torch.backends.nnpack.set_flags(False)


def in_effect(mode: str | None = None) -> dict:
    """Step 2: the kernels this process uses, asked of each library (fixes ATen's and MKL's choice)."""
    import torch

    return {
        "mode": mode or (_MODE[0] if _MODE else "native"),
        "aten": torch.backends.cpu.get_cpu_capability(),
        "mkl": _mkl_branch(),
        "mkldnn": bool(torch.backends.mkldnn.enabled),
        "nnpack": bool(torch._C._get_nnpack_enabled()),
    }


def check(mode: str, found: dict | None = None) -> dict:
    """Step 3: ``ConfigError`` when ``portable`` is asked and any library runs other kernels."""
    found = found or in_effect(mode)
    if mode == "portable":
        wrong = [
            f"{k} {found.get(k)} (not {v})"
            for k, v in PORTABLE.items()
            if found.get(k) != v and not (k == "mkl" and found.get(k) is None)  # a torch without MKL
        ]
        if wrong:
            raise ConfigError(
                "trainer.numerics=portable is not in effect in this process: " + ", ".join(wrong) + "; torch "
                "computed before the run started (start a new process: python src/run.py ..., or call "
                "clsuite.numerics.apply('portable') before any torch computation), or use trainer.numerics=native"
            )
    return found


def label(found: dict | None) -> str:
    """A kernel set as a table names it: ``portable``, ``native (ATen AVX2, MKL auto AVX2)``, or
    ``unrecorded`` for a run made before the suite recorded its kernels."""
    if not found:
        return "unrecorded"
    if found.get("mode") == "portable":
        return "portable"
    return f"native (ATen {found.get('aten')}, MKL {found.get('mkl')})"


def summary(found: dict, device: str = "cpu") -> str:
    """One phrase for the run summary: ``portable (ATen DEFAULT, MKL COMPATIBLE, oneDNN off)``; on a
    GPU it says that the network's arithmetic is the GPU's, which no mode pins."""
    dnn = "oneDNN on" if found.get("mkldnn") else "oneDNN off"
    text = f"{found.get('mode')} (ATen {found.get('aten')}, MKL {found.get('mkl')}, {dnn})"
    if not str(device).startswith("cpu"):
        text += f"; the network computes on {device}: its arithmetic is the GPU's (docs/NUMERICS.md)"
    return text


# ----------------------------------------------------------------------------- the libraries


def _mkl() -> ctypes.CDLL | None:
    """torch's own oneMKL (linked into libtorch_cpu), whose CNR service functions it exports."""
    import torch

    lib = Path(torch.__file__).parent / "lib" / "libtorch_cpu.so"
    with contextlib.suppress(OSError):
        dll = ctypes.CDLL(str(lib))
        if hasattr(dll, "mkl_serv_cbwr_get") and hasattr(dll, "mkl_serv_cbwr_get_auto_branch"):
            return dll
    return None


def _mkl_branch() -> str | None:
    """The code branch MKL runs: the CNR branch (``mkl_cbwr_get(MKL_CBWR_BRANCH)``), or with CNR off
    ``auto <branch>``, the branch its dispatch picks on this CPU; None for a torch without MKL."""
    dll = _mkl()
    if dll is None:
        return None
    dll.mkl_serv_cbwr_get.argtypes, dll.mkl_serv_cbwr_get.restype = [ctypes.c_int], ctypes.c_int
    dll.mkl_serv_cbwr_get_auto_branch.restype = ctypes.c_int
    code = dll.mkl_serv_cbwr_get(1)
    if code == 1:  # MKL_CBWR_BRANCH_OFF: no CNR, the CPU's own dispatch
        code = dll.mkl_serv_cbwr_get_auto_branch()
        return f"auto {MKL_BRANCHES.get(code, code)}"
    return MKL_BRANCHES.get(code, f"branch {code}")
