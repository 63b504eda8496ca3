"""The installable package: dependency ranges, the packaged configs, the console command, the API."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from clsuite import api
from clsuite.config import check as config
from clsuite.config.check import ConfigError
from clsuite.run import identity, io

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
FAST = ["benchmark=synthetic", "logger=none", "trainer=cpu", "trainer.progress_bar=false"]


def _pins() -> dict[str, str]:
    lines = (ROOT / "requirements.txt").read_text().split("# development")[0].splitlines()
    reqs = [Requirement(line.split("#")[0]) for line in lines if line.split("#")[0].strip()]
    return {r.name: next(iter(r.specifier)).version for r in reqs}


def test_every_pin_satisfies_the_package_range():
    ranges = {Requirement(d).name: Requirement(d) for d in PYPROJECT["project"]["dependencies"]}
    pins = _pins()
    assert ranges["torch"].specifier.contains("2.13.0") and not ranges["torch"].specifier.contains("2.14.0")
    for name, req in ranges.items():
        assert name in pins, f"{name} is a package dependency but not pinned in requirements.txt"
        assert req.specifier.contains(pins[name]), f"{name}=={pins[name]} outside {req.specifier}"
    assert all(str(r.specifier) for r in ranges.values())  # no unpinned dependency


def test_package_ships_configs_sweeps_and_a_console_command():
    hatch = PYPROJECT["tool"]["hatch"]["build"]["targets"]["wheel"]
    assert hatch["force-include"] == {"conf": "clsuite/conf", "sweeps": "clsuite/sweeps"}
    assert config.SWEEPS_DIR == ROOT / "sweeps"  # a checkout: the repository's paper sweeps
    assert PYPROJECT["project"]["scripts"] == {"clsuite": "clsuite.commands:main"}
    assert "src/clsuite" in hatch["packages"] and not (ROOT / "src" / "run").exists()
    assert config.CONF_DIR == ROOT / "conf"  # a checkout: the repository's configs
    assert {"benchmark", "method", "trainer", "launcher"} <= set(config.GROUPS)


def test_api_validates_as_the_cli_does():
    with pytest.raises(ConfigError, match=r"^lr must be a finite number, got nan$"):
        api.compose([*FAST, "lr=nan"])
    with pytest.raises(ConfigError, match=r"^unknown method 'nope'; valid choices: "):
        api.compose(["method=nope"])
    with pytest.raises(ConfigError, match=r"^unknown key 'memroy'"):
        api.compose(["+memroy=50"])
    cfg = api.compose([*FAST, "seed=1"])
    cfg.seed = -1  # edited after compose: run validates again
    with pytest.raises(ConfigError, match=r"^seed must be a whole number in \[0, 4294967295\], got -1$"):
        api.run(cfg, "unused")


def test_api_run_returns_the_results_dict(tmp_path):
    res = api.run([*FAST, "method=online", "seed=2"], tmp_path / "run")
    on_disk = json.loads((tmp_path / "run" / io.RESULTS_FILE).read_text())
    assert on_disk["R"] == res["R"] and res["seed"] == 2 and res["identity"]["key"] == on_disk["identity"]["key"]


# ----------------------------------------------------------------------------- code identity of a wheel


def _identity_in(site: Path, cwd: Path) -> dict:
    """``code_identity()`` as computed by a process that imports ``clsuite`` from ``site``."""
    code = "import json, clsuite.run.identity as i; print(json.dumps([i.code_identity(), i.__file__]))"
    env = {**os.environ, "PYTHONPATH": str(site)}
    p = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    ident, file = json.loads(p.stdout.splitlines()[-1])
    assert Path(file).resolve().is_relative_to(site.resolve()), file  # not the checkout's copy
    return ident


def wheel_layout(site: Path) -> Path:
    """The files laid out as [tool.hatch.build.targets.wheel] says (packages; configs and sweeps
    inside clsuite/)."""
    hatch = PYPROJECT["tool"]["hatch"]["build"]["targets"]["wheel"]
    skip = shutil.ignore_patterns("__pycache__")
    for pkg in hatch["packages"]:
        shutil.copytree(ROOT / pkg, site / Path(pkg).name, ignore=skip)
    for src, dst in hatch["force-include"].items():
        shutil.copytree(ROOT / src, site / dst, ignore=skip)
    return site


def test_the_wheel_layout_pyproject_declares_has_the_checkouts_code_identity(tmp_path):
    """Fast: the wheel's layout, imported from there by another process (its sweeps are configs:
    not code)."""
    site = wheel_layout(tmp_path / "site")
    assert _identity_in(site, tmp_path) == identity.code_identity()
    (site / "clsuite" / "conf" / "method" / "er.yaml").write_text("name: er\n")  # a config edit moves it
    assert _identity_in(site, tmp_path) != identity.code_identity()


@pytest.mark.slow
def test_an_installed_wheel_has_the_checkouts_code_identity(tmp_path):
    """A real wheel (hatchling, through pip; from PyPI when the venv has no hatchling), installed into
    a target folder, computes the code identity of this checkout: resume and reuse carry over."""
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"), str(ROOT)]
    if importlib.util.find_spec("hatchling"):
        cmd.insert(5, "--no-build-isolation")
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if p.returncode and "hatchling" in p.stderr and "No matching distribution" in p.stderr:
        pytest.skip("hatchling unavailable: no network to PyPI and not installed")
    assert p.returncode == 0, p.stderr[-3000:]
    (whl,) = (tmp_path / "dist").glob("clsuite-*.whl")
    site = tmp_path / "site"
    cmd = [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site), str(whl)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    assert (site / "clsuite" / "conf" / "config.yaml").is_file() and not (site / "run.py").exists()
    assert (site / "clsuite" / "sweeps" / "table2.yaml").is_file()  # clsuite paper table2 works installed
    assert (site / "clsuite" / "analysis" / "paper_values.yaml").is_file()  # the paper's numbers: package data
    assert _identity_in(site, tmp_path) == identity.code_identity()
    p = _installed(site, tmp_path, "paper", "all", "--seeds", "10", "--dry-run")
    assert p.returncode == 0 and f"{site / 'clsuite' / 'sweeps'} --config-name ablation_cifar100" in p.stdout


def _installed(site: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """``python -m clsuite <args>`` with ``clsuite`` imported from ``site``, outside any checkout, no
    ``clsuite`` command on the PATH."""
    path = os.pathsep.join(
        p for p in os.environ.get("PATH", "").split(os.pathsep) if not (Path(p) / "clsuite").exists()
    )
    env = {**os.environ, "PYTHONPATH": str(site), "PATH": path}
    cmd = [sys.executable, "-m", "clsuite", *args]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_the_installed_package_runs_a_paper_target_and_lists_its_verbs(tmp_path):
    """What the checkout's ``make table2`` does, from the wheel's layout in a folder that is no
    checkout: the sweep from the package's own sweeps, then the Table II layout; the hint names the
    form that works there (``<python> -m clsuite``, no console command on the PATH)."""
    site = wheel_layout(tmp_path / "site")
    work = tmp_path / "work"
    work.mkdir()
    p = _installed(site, work, "paper", "table2", "--seeds", "1", "--benchmarks", "synthetic", "--methods",
                   "er,online", "logger=none", "trainer=cpu", "trainer.progress_bar=false")  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    assert f"tables and figures: {sys.executable} -m clsuite aggregate table2" in p.stderr
    assert sorted(d.name for d in (work / "multirun" / "table2").iterdir() if (d / io.RESULTS_FILE).exists()) == [
        "benchmark=synthetic,method=er,reading=mir_code,seed=0",
        "benchmark=synthetic,method=online,reading=mir_code,seed=0",
    ]
    md = (work / "results" / "table2" / "table2.md").read_text()
    assert "### Table II (table2): synthetic" in md and "| ER |" in md and "| Online |" in md
    for args in (["--help"], ["help"]):
        p = _installed(site, work, *args)
        assert p.returncode == 0 and "clsuite paper TARGET" in p.stdout and "clsuite help [VERB]" in p.stdout
    p = _installed(site, work, "paper", "nope")
    assert p.returncode == 2 and p.stderr.startswith("error: unknown paper target 'nope'; valid choices: table2")


def test_every_third_party_import_of_the_package_is_a_declared_dependency():
    """What ``src/`` imports (its top-level modules, stdlib and first-party aside) maps to distributions
    (``importlib.metadata.packages_distributions``), each declared in pyproject's dependencies."""
    import ast
    from importlib.metadata import packages_distributions

    first_party = {p.name for p in (ROOT / "src").iterdir() if p.is_dir()}
    mods = set()
    for path in (ROOT / "src").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                mods |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                mods.add(node.module.split(".")[0])
    mods -= set(sys.stdlib_module_names) | first_party
    declared = {Requirement(d).name.lower() for d in PYPROJECT["project"]["dependencies"]}
    dists = packages_distributions()
    assert {"torch", "torchmetrics", "yaml"} <= mods
    missing = {m: dists.get(m) for m in mods if not {d.lower() for d in dists.get(m, [m])} & declared}
    assert missing == {}, f"imported but not declared in pyproject.toml: {missing}"
