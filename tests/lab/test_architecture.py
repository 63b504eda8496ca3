"""The import graph of ``src/clsuite`` (docs/DEVELOPING.md): no circle, at most 10 floors, and every
import between the packages points down: core < config < run < sweep < analysis < the entry modules.

Every ``import`` / ``from ... import`` of a ``clsuite`` module counts, those inside functions too:
a function-level import that climbs back up is a circle all the same, only hidden until it runs.
A floor is a module's place on the longest chain of imports below it (a module importing no other
``clsuite`` module is on floor 1).
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
MAX_FLOORS = 10
LAYERS = ("core", "config", "run", "sweep", "analysis")  # bottom up; the entry modules (cli, api, paper, ...) above


def import_graph() -> dict[str, set[str]]:
    mods = {}
    for p in (SRC / "clsuite").rglob("*.py"):
        name = ".".join(p.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__")
        mods[name] = p
    graph = {m: set() for m in mods}
    for m, p in mods.items():
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            else:
                continue
            for n in names:
                while n and n not in mods:  # `from clsuite.x import name`: the module clsuite.x
                    n = n.rpartition(".")[0]
                if n and n != m:
                    graph[m].add(n)
    return graph


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle, as the list of its modules, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(m, path):
        state[m] = 1
        for w in sorted(graph[m]):
            if state.get(w) == 1:
                return [*path[path.index(w) :], w]
            if w not in state and (found := visit(w, [*path, w])):
                return found
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (found := visit(m, [m])):
            return found
    return None


def test_no_module_imports_what_imports_it():
    graph = import_graph()
    assert len(graph) > 50 and "clsuite.config.check" in graph["clsuite.cli"]  # (the graph is read)
    assert cycle(graph) is None, f"import circle: {' -> '.join(cycle(graph))}"


def test_the_house_has_at_most_10_floors():
    graph = import_graph()
    assert cycle(graph) is None  # (floors are counted on a graph without circles)

    @functools.cache
    def floor(m: str) -> int:
        return 1 + max((floor(w) for w in graph[m]), default=0)

    top = max(graph, key=floor)
    chain = [top]
    while graph[chain[-1]]:
        chain.append(max(graph[chain[-1]], key=floor))
    assert floor(top) <= MAX_FLOORS, f"{floor(top)} floors (at most {MAX_FLOORS}): {' -> '.join(chain)}"


def test_the_cycle_finder_finds_a_circle():
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": set()}) is None


def test_the_core_imports_nothing_outside_it():
    """``clsuite.core`` (the science: data, memory, replay, methods, models, learner, metrics, the
    callbacks that make R) knows nothing of the lab: no import of another ``clsuite`` module."""
    graph = import_graph()
    core = {m for m in graph if m == "clsuite.core" or m.startswith("clsuite.core.")}
    assert len(core) > 30 and "clsuite.core.memory.buffer" in graph["clsuite.core.memory.base"]  # (the graph is read)
    out = sorted(f"{m} -> {w}" for m in core for w in graph[m] if w not in core)
    assert not out, "the core imports outside it: " + "; ".join(out)


def layer(module: str) -> int:
    """A module's layer: its package's place in :data:`LAYERS`, or the top for a module directly in clsuite."""
    parts = module.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS else len(LAYERS)


def test_every_import_between_packages_points_down():
    graph = import_graph()
    assert layer("clsuite.cli") == 5 and layer("clsuite.run.identity") == 2 and layer("clsuite.core") == 0
    up = sorted(f"{m} -> {w}" for m, ws in graph.items() for w in ws if layer(w) > layer(m))
    assert not up, "imports that climb a layer: " + "; ".join(up)
