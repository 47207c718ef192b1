"""The core stays layered: no import circle among the facts and the rule layer's data, the
facts never import the layers that drive them, and every facts module is small enough to
read in one sitting.

Imports are read from the sources with `ast`, without importing anything. Every import
counts, wherever it is: at module level, under `if TYPE_CHECKING:` (a circle for the type
checker is a circle for the reader too), and inside functions (a function-level import is
not a way out of a circle).
"""

from __future__ import annotations

import ast
import textwrap
from collections import deque
from pathlib import Path

import perflint

PACKAGE_DIR = Path(perflint.__file__).resolve().parent
FACTS = "perflint.facts"
# The rule layer's side of the facts: rule.py builds on them, findings.py is below them.
RULE_LAYER = ("perflint.rule", "perflint.findings")
# The layers that drive the facts: the facts never import them.
ABOVE_FACTS = ("perflint.rule", "perflint.engine", "perflint.api", "perflint.runner", "perflint.cli",
               "perflint.cache", "perflint.noqa_tools")
MAX_LINES = 800


# --------------------------------------------------------------------------- the import graph
def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_modules() -> dict[str, Path]:
    """Every module of the `perflint` package, by dotted name."""
    return {module_name(path): path for path in sorted(PACKAGE_DIR.rglob("*.py"))}


def imported_modules(name: str, source: str, is_package: bool, known: set[str]) -> set[str]:
    """The modules among `known` that module `name` imports, anywhere in its `source`."""
    package = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            # `from . import values` imports a module; `from .values import Kind`, a name of one.
            candidates = [f"{module}.{alias.name}" if f"{module}.{alias.name}" in known else module
                          for alias in node.names]
        else:
            continue
        for candidate in candidates:
            while candidate and candidate not in known:  # outside the package: dropped
                candidate = candidate.rpartition(".")[0]
            if candidate and candidate != name:
                found.add(candidate)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = package_modules()
    known = set(modules)
    return {
        name: imported_modules(name, path.read_text(encoding="utf-8"), path.name == "__init__.py", known)
        for name, path in modules.items()
    }


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of `graph` as a path [a, b, ..., a], or None when there is none."""
    state: dict[str, int] = {}  # 1: on the current path; 2: done, no circle through it
    for root in sorted(graph):
        if root in state:
            continue
        path = [root]
        state[root] = 1
        pending = [iter(sorted(graph[root]))]
        while pending:
            step = next(pending[-1], None)
            if step is None:
                state[path.pop()] = 2
                pending.pop()
            elif state.get(step) == 1:
                return path[path.index(step):] + [step]
            elif step not in state:
                state[step] = 1
                path.append(step)
                pending.append(iter(sorted(graph.get(step, ()))))
    return None


def cycle_through(graph: dict[str, set[str]], start: str) -> list[str] | None:
    """The shortest circle from `start` back to itself, through any modules, or None."""
    parent: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for step in sorted(graph.get(node, ())):
            if step == start:
                back = [node]
                while back[-1] != start:
                    back.append(parent[back[-1]])
                return [*reversed(back), start]
            if step not in parent:
                parent[step] = node
                queue.append(step)
    return None


def in_facts(name: str) -> bool:
    return name == FACTS or name.startswith(FACTS + ".")


def in_layer(name: str) -> bool:
    return in_facts(name) or name in RULE_LAYER


# --------------------------------------------------------------------------- the tools themselves
def test_the_cycle_finders_find_circles_and_only_circles():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None  # a diamond
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"b"}}) == ["b", "c", "b"]
    graph = {"a": {"x"}, "x": {"y"}, "y": {"a", "b"}, "b": set()}
    assert cycle_through(graph, "a") == ["a", "x", "y", "a"]
    assert cycle_through(graph, "b") is None


def test_the_graph_counts_relative_type_checking_and_function_level_imports():
    known = {"perflint", "perflint.types", "perflint.rule", "perflint.engine", "perflint.facts",
             "perflint.facts.values", "perflint.facts.hints", "perflint.facts.demo"}
    source = textwrap.dedent("""
        from typing import TYPE_CHECKING
        import ast
        import perflint.types
        from . import hints
        from .values import Kind
        if TYPE_CHECKING:
            from ..rule import Rule
        def later():
            from ..engine import Engine
    """)
    assert imported_modules("perflint.facts.demo", source, False, known) == {
        "perflint.types", "perflint.facts.hints", "perflint.facts.values", "perflint.rule", "perflint.engine"}


# --------------------------------------------------------------------------- the layers
def test_no_import_circle_among_the_facts_and_the_rule_layer():
    graph = import_graph()
    layer = {name: {target for target in targets if in_layer(target)}
             for name, targets in graph.items() if in_layer(name)}
    cycle = find_cycle(layer)
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])
    # nor one that leaves the layer and comes back through other modules
    circles = [cycle_through(graph, name) for name in sorted(layer)]
    assert [" -> ".join(c) for c in circles if c] == []


def test_the_facts_import_no_layer_above_them():
    graph = import_graph()
    wrong = sorted(
        f"{name} imports {target}"
        for name, targets in graph.items() if in_facts(name)
        for target in targets
        if target in ABOVE_FACTS or target.startswith(tuple(above + "." for above in ABOVE_FACTS))
    )
    assert wrong == []


def test_every_facts_module_and_class_is_small_enough_to_read_in_one_sitting():
    too_long = {}
    for name, path in package_modules().items():
        if not in_facts(name):
            continue
        source = path.read_text(encoding="utf-8")
        if len(source.splitlines()) > MAX_LINES:
            too_long[name] = len(source.splitlines())
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > MAX_LINES:
                too_long[f"{name}.{node.name}"] = node.end_lineno - node.lineno + 1
    assert too_long == {}


# --------------------------------------------------------------------------- the whole package
# What each layer must never import: the layers above it (issue 12 names these).
NEVER_IMPORTS = {
    "perflint.noqa_tools": ("perflint.api", "perflint.runner", "perflint.engine", "perflint.cli"),
    "perflint.runner": ("perflint.api", "perflint.cli", "perflint.baseline"),
    "perflint.engine": ("perflint.api", "perflint.runner", "perflint.cache", "perflint.cli"),
    "perflint.cache": ("perflint.api", "perflint.runner", "perflint.cli"),
    "perflint.project": ("perflint.api", "perflint.runner", "perflint.engine", "perflint.cli"),
    "perflint.notebook": ("perflint.api", "perflint.runner", "perflint.cli"),
    "perflint.api": ("perflint.cli", "perflint.baseline"),
}
# Packages that run inside the measured program (bench, trace) import lazily on purpose: torch
# and the tracer must not load perflint's analysis, and the registry loads the rules plugin.
LAZY_IMPORTS_ALLOWED = ("perflint.harness", "perflint.trace", "perflint.registry")


def test_no_import_circle_in_the_whole_package():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])


def test_lower_layers_never_import_higher_ones():
    graph = import_graph()
    wrong = sorted(f"{name} imports {target}" for name, forbidden in NEVER_IMPORTS.items()
                   for target in graph.get(name, ()) if target in forbidden)
    assert wrong == []


def test_no_function_level_import_of_perflint_modules_outside_the_runtime_packages():
    found = []
    for name, path in package_modules().items():
        if name.startswith(LAZY_IMPORTS_ALLOWED):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for inner in ast.walk(node):
                if isinstance(inner, ast.ImportFrom) and (inner.level or (inner.module or "").startswith("perflint")):
                    found.append(f"{name}:{inner.lineno}")
                elif isinstance(inner, ast.Import) and any(a.name.startswith("perflint") for a in inner.names):
                    found.append(f"{name}:{inner.lineno}")
    assert found == []
