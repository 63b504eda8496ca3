"""Which CPU kernels do a run's arithmetic (``trainer.numerics``: ``native`` or ``portable``): pinned once
per process before its first torch computation, asked back and recorded in the run's identity
(docs/notes/NUMERICS.md, "The two modes").
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

from clsuite.core.errors import ConfigError

MODES = ("native", "portable")
PORTABLE_ENV = {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE"}
# The environment variables the numeric libraries read, by the libraries' prefixes (docs/notes/NUMERICS.md,
# "The environment"): ATen; oneMKL; oneDNN under its three names; the OpenMP runtimes (GNU, Intel /
# LLVM); numpy and its BLAS; torch; the GPU libraries. Every one set is recorded, unless it is below.
KERNEL_ENV = ("ATEN_", "MKL_", "MKLDNN_", "ONEDNN_", "DNNL_", "OMP_", "KMP_", "GOMP_", "NPY_", "OPENBLAS_", "GOTO",
              "BLIS_", "TORCH", "PYTORCH_", "CUDA_", "CUBLAS", "CUDNN_", "NVIDIA_TF32_OVERRIDE")  # fmt: skip
# Set ones that move no number: thread counts (every run pins its pools and records them as threads),
# thread placement and waiting, logs, where files are kept, which GPU is visible (the device type is
# recorded), the GPU's memory allocator, and those the libraries set when imported (threadpoolctl:
# KMP_DUPLICATE_LIB_OK, joblib: KMP_INIT_AT_FORK, Lightning: PYTORCH_NVML_BASED_CUDA_CHECK).
NEUTRAL_ENV = frozenset({
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "BLIS_NUM_THREADS",
    "OMP_PROC_BIND", "OMP_PLACES", "OMP_WAIT_POLICY", "KMP_AFFINITY", "KMP_BLOCKTIME", "GOMP_CPU_AFFINITY",
    "GOMP_SPINCOUNT", "OMP_DISPLAY_ENV", "OMP_DISPLAY_AFFINITY", "KMP_SETTINGS", "KMP_WARNINGS", "MKL_VERBOSE",
    "ONEDNN_VERBOSE", "DNNL_VERBOSE", "MKLDNN_VERBOSE", "TORCH_LOGS", "TORCH_SHOW_CPP_STACKTRACES",
    "TORCH_CPP_LOG_LEVEL", "TORCH_HOME", "TORCH_EXTENSIONS_DIR", "TORCHINDUCTOR_CACHE_DIR", "CUDA_HOME", "CUDA_PATH",
    "CUDA_CACHE_PATH", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "CUDA_LAUNCH_BLOCKING", "PYTORCH_CUDA_ALLOC_CONF",
    "KMP_DUPLICATE_LIB_OK", "KMP_INIT_AT_FORK", "PYTORCH_NVML_BASED_CUDA_CHECK",
})  # fmt: skip
# Read by the GPU's libraries only: not recorded for a run on the CPU.
GPU_ENV = ("CUDA_", "CUBLAS", "CUDNN_", "NVIDIA_TF32_OVERRIDE", "PYTORCH_CUDA_", "PYTORCH_TUNABLEOP_", "TORCH_CUDNN_",
           "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", "TORCH_BLAS_PREFER_CUBLASLT")  # fmt: skip
PORTABLE_OFF = ("MKLDNN_", "ONEDNN_", "DNNL_")  # oneDNN's variables: portable turns oneDNN off
# numpy's BLAS (OpenBLAS, GotoBLAS, BLIS) computes no part of a run: torch's products are oneMKL's, GEM's QP is
# formed in torch and solved by quadprog's own loops, numpy only draws and averages. Portable lets their
# variables be (some machines set OPENBLAS_CORETYPE for old OpenBLAS builds); native records them as it finds them.
NUMPY_BLAS = ("OPENBLAS_", "GOTO", "BLIS_")
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


def variables(mode: str, device: str = "cpu", deterministic: bool = False) -> dict[str, str]:
    """Step 2: ``{name: value}`` of the kernel variables set in this process's environment that can
    act on a run: each under :data:`KERNEL_ENV`, less :data:`NEUTRAL_ENV`, :data:`GPU_ENV` on the
    CPU, and those the run sets itself or that cannot act on it: portable's :data:`PORTABLE_ENV`,
    :data:`PORTABLE_OFF` and :data:`NUMPY_BLAS`,
    ``CUBLAS_WORKSPACE_CONFIG`` under ``trainer.deterministic`` (Lightning sets it before the fit)."""
    own = {*(PORTABLE_ENV if mode == "portable" else ()), *(["CUBLAS_WORKSPACE_CONFIG"] if deterministic else ())}
    off = (
        *(PORTABLE_OFF + NUMPY_BLAS if mode == "portable" else ()),
        *(GPU_ENV if str(device).startswith("cpu") else ()),
    )
    return {
        k: v
        for k, v in sorted(os.environ.items())
        if k.startswith(KERNEL_ENV) and k not in NEUTRAL_ENV and k not in own and not k.startswith(off)
    }


def check_environment(mode: str) -> None:
    """``ConfigError`` when ``portable`` is asked in an environment holding a kernel variable that
    it neither pins nor turns off (:func:`variables` on the CPU; a GPU's are recorded: no mode pins
    a GPU's arithmetic): portable refuses it, where native records it."""
    if mode == "portable" and (found := variables(mode)):
        named = ", ".join(f"{k}={v}" for k, v in found.items())
        raise ConfigError(
            f"trainer.numerics=portable cannot pin {named}: set in the environment, it may choose the kernels that "
            f"compute the run, and portable pins only {', '.join(PORTABLE_ENV)} and turns oneDNN off, so a seed's R "
            "would depend on it; unset it, or use trainer.numerics=native, which records it in the run's identity"
        )


def check(mode: str, found: dict | None = None) -> dict:
    """Step 3: ``ConfigError`` when ``portable`` is asked and any library runs other kernels, or the
    environment holds a kernel variable it cannot pin (:func:`check_environment`)."""
    found = found or in_effect(mode)
    check_environment(mode)
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
                "clsuite.config.numerics.apply('portable') before any torch computation), or use trainer.numerics=native"
            )
    return found


def label(found: dict | None) -> str:
    """A kernel set as a table names it: ``portable``, ``native (ATen AVX2, MKL auto AVX2)``, with
    its recorded variables (``native (ATen AVX2, MKL auto AVX2; ONEDNN_DEFAULT_FPMATH_MODE=BF16)``),
    or ``unrecorded`` for a run made before the suite recorded its kernels."""
    if not found:
        return "unrecorded"
    named = _named(found)
    if found.get("mode") == "portable":
        return f"portable ({named})" if named else "portable"
    return f"native (ATen {found.get('aten')}, MKL {found.get('mkl')}{'; ' + named if named else ''})"


def _named(found: dict) -> str:
    """``NAME=value, ...``: a kernel set's recorded variables (:func:`variables`), or ``""``."""
    return ", ".join(f"{k}={v}" for k, v in (found.get("variables") or {}).items())


def summary(found: dict, device: str = "cpu") -> str:
    """One phrase for the run summary: ``portable (ATen DEFAULT, MKL COMPATIBLE, oneDNN off)``; on a
    GPU it says that the network's arithmetic is the GPU's, which no mode pins."""
    dnn = "oneDNN on" if found.get("mkldnn") else "oneDNN off"
    named = f"; {_named(found)}" if _named(found) else ""
    text = f"{found.get('mode')} (ATen {found.get('aten')}, MKL {found.get('mkl')}, {dnn}{named})"
    if not str(device).startswith("cpu"):
        text += f"; the network computes on {device}: its arithmetic is the GPU's (docs/notes/NUMERICS.md)"
    return text


# ----------------------------------------------------------------------------- the libraries


def _mkl_branch() -> str | None:
    """The code branch torch's own oneMKL (linked into libtorch_cpu, which exports its CNR service
    functions) runs: the CNR branch (``mkl_cbwr_get(MKL_CBWR_BRANCH)``), or with CNR off ``auto
    <branch>``, the branch its dispatch picks on this CPU; None for a torch without MKL."""
    import torch

    try:
        dll = ctypes.CDLL(str(Path(torch.__file__).parent / "lib" / "libtorch_cpu.so"))
    except OSError:
        return None
    if not (hasattr(dll, "mkl_serv_cbwr_get") and hasattr(dll, "mkl_serv_cbwr_get_auto_branch")):
        return None
    dll.mkl_serv_cbwr_get.argtypes, dll.mkl_serv_cbwr_get.restype = [ctypes.c_int], ctypes.c_int
    dll.mkl_serv_cbwr_get_auto_branch.restype = ctypes.c_int
    code = dll.mkl_serv_cbwr_get(1)
    if code == 1:  # MKL_CBWR_BRANCH_OFF: no CNR, the CPU's own dispatch
        code = dll.mkl_serv_cbwr_get_auto_branch()
        return f"auto {MKL_BRANCHES.get(code, code)}"
    return MKL_BRANCHES.get(code, f"branch {code}")
