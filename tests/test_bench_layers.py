"""scripts/bench's modules import one way: the command line, then its checks, then the
modes, then what the modes are made of, then the shared helpers (scripts/bench/__init__.py
describes each layer). Read from the source, late imports included."""

import ast
import os
import shutil
from typing import Dict, List

import pytest

pytestmark = pytest.mark.unit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "scripts", "bench")
PACKAGE = "scripts.bench"

# Top to bottom; a module imports only from layers below its own, so the modes of one
# layer (the tables, the suite, ...) never import each other.
LAYERS = (
    ("cli",),
    ("checks",),
    ("tables", "suite", "workers", "remote"),
    ("runs", "peer_runs"),
    ("peer_checkpoints",),
    ("costs", "peer_settings", "columns"),
    ("children",),
)
LAYER_OF: Dict[str, int] = {name: i for i, layer in enumerate(LAYERS) for name in layer}


def imported_modules(node: ast.AST) -> List[str]:
    """The modules of scripts/bench that an import statement names ([] for any other)."""
    if isinstance(node, ast.Import):
        return [
            alias.name[len(PACKAGE) + 1 :].split(".")[0]
            for alias in node.names
            if alias.name.startswith(PACKAGE + ".")
        ]
    if not isinstance(node, ast.ImportFrom):
        return []
    module = node.module or ""
    if node.level == 1 or module == PACKAGE:  # from . import a / from scripts.bench import a
        inner = module if node.level == 1 else ""
        return [inner.split(".")[0]] if inner else [alias.name for alias in node.names]
    if module.startswith(PACKAGE + "."):
        return [module[len(PACKAGE) + 1 :].split(".")[0]]
    return []


def layer_faults(folder: str) -> List[str]:
    """One line per module of ``folder`` left out of LAYERS, and per import of a module in
    the same layer or one above ("tables.py:12 imports cli, a layer above")."""
    faults = []
    for file_name in sorted(os.listdir(folder)):
        name = file_name[: -len(".py")]
        if not file_name.endswith(".py") or name == "__init__":
            continue
        if name not in LAYER_OF:
            faults.append(f"{file_name} is in no layer: add it to LAYERS")
            continue
        with open(os.path.join(folder, file_name), encoding="utf-8") as f:
            tree = ast.parse(f.read(), file_name)
        for node in ast.walk(tree):
            for target in imported_modules(node):
                if target not in LAYER_OF:
                    continue  # a module left out: said above, when its own file is read
                if LAYER_OF[target] == LAYER_OF[name]:
                    faults.append(f"{file_name}:{node.lineno} imports {target}, of its own layer")
                elif LAYER_OF[target] < LAYER_OF[name]:
                    faults.append(f"{file_name}:{node.lineno} imports {target}, a layer above")
    return faults


def test_every_module_of_the_benchmark_imports_only_from_the_layers_below_it():
    assert layer_faults(BENCH) == []


def test_an_upward_import_a_sibling_import_and_an_unplaced_module_are_each_named(tmp_path):
    copy = tmp_path / "bench"
    shutil.copytree(BENCH, copy)
    with open(copy / "children.py", "a", encoding="utf-8") as f:
        f.write("\n\ndef late():\n    from scripts.bench import cli  # noqa\n")
    with open(copy / "suite.py", "a", encoding="utf-8") as f:
        f.write("\nfrom scripts.bench.tables import run_table  # noqa\n")
    (copy / "extra.py").write_text("")
    children_lines = len((copy / "children.py").read_text().splitlines())
    suite_lines = len((copy / "suite.py").read_text().splitlines())
    assert layer_faults(str(copy)) == [
        f"children.py:{children_lines} imports cli, a layer above",
        "extra.py is in no layer: add it to LAYERS",
        f"suite.py:{suite_lines} imports tables, of its own layer",
    ]
