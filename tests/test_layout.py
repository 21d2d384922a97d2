"""The code's shape: sub-packages along the pipeline, imports flowing one way, a stdlib-only harness."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from helpers import REPO

PACKAGE = REPO / "ablation"
# The pipeline, in order: a package may import only from itself and the packages before it.
ORDER = ["errors", "util", "spec", "modeldirs", "envs", "harness", "results", "execution", "analysis",
         "report", "bisect", "cli"]


def _imports(path: Path) -> set[str]:
    """Every ablation module a file imports (top level or inside functions), as dotted names."""
    found = set()
    pkg = ".".join(path.relative_to(REPO).with_suffix("").parts[:-1])
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = pkg.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            found |= {base} | {f"{base}.{a.name}" for a in node.names}
    return {m for m in found if m == "ablation" or m.startswith("ablation.")}


def _stage(module: str) -> int:
    return ORDER.index(module.split(".")[1]) if module.count(".") >= 1 else -1


def test_every_module_lives_in_a_pipeline_package_and_imports_flow_one_way():
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(REPO).with_suffix("").parts
        if rel[1] not in ORDER and rel[1] != "__init__":
            wrong.append(f"{path}: not in a pipeline package ({', '.join(ORDER)})")
            continue
        here = ORDER.index(rel[1]) if rel[1] != "__init__" else len(ORDER)
        for target in _imports(path):
            if target.count(".") >= 1 and target.split(".")[1] in ORDER and _stage(target) > here:
                wrong.append(f"{'.'.join(rel)} imports {target}, a later stage of the pipeline")
    assert wrong == []


def test_no_import_cycle():
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        name = ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
        graph[name] = set()
        for t in _imports(path):
            while t and t not in {".".join(p.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
                                  for p in PACKAGE.rglob("*.py")}:
                t = t.rpartition(".")[0]
            if t and t != name and not name.startswith(t + "."):
                graph[name].add(t)
    sys.setrecursionlimit(10000)
    state: dict[str, int] = {}
    cycle: list[str] = []

    def visit(v: str, stack: list[str]) -> bool:
        state[v] = 1
        for w in graph.get(v, ()):
            if state.get(w) == 1:
                cycle.extend(stack[stack.index(w):] + [w])
                return True
            if w not in state and visit(w, stack + [w]):
                return True
        state[v] = 2
        return False

    assert not any(visit(v, [v]) for v in sorted(graph) if v not in state), " -> ".join(cycle)


def test_the_harness_imports_only_the_standard_library_and_what_the_leg_provides():
    """It runs inside a leg's venv, where the runner's packages (pydantic, click, ablation) do not exist."""
    leg_provides = {"vllm", "torch", "numpy", "PIL", "transformers"}
    for path in (PACKAGE / "harness").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else [])
            for name in names:
                top = name.split(".")[0]
                sibling = (PACKAGE / "harness" / f"{top}.py").is_file() or name == "ablation.harness"  # its own modules
                ok = top in sys.stdlib_module_names or top in leg_provides or sibling
                assert ok, f"{path.name} imports {name}"
