"""rl's import layers (declared once, in .importlinter) and the absence of import circles.

The layers are checked by import-linter, in process, as ``lint-imports`` does from the
repository root; the circles by grimp, the graph library under it (import-linter's own
acyclic contract works on packages, and rl.algos and rl.models import each other's
modules without a circle among the modules). Each check is also run on a copy of rl with
one planted upward import, and must fail naming that import.
"""

import os
import re
import shutil
import sys
from typing import List

import grimp
import pytest
from importlinter import configuration
from importlinter.application import use_cases

pytestmark = pytest.mark.unit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(ROOT, ".importlinter")
PLANTED = "rl_planted"


def lint_layers(config: str) -> bool:
    """Runs the contracts of ``config`` as ``lint-imports`` does (report on stdout).

    import-linter's use case, not its command: the command also sets up logging, which
    closes the handlers TensorFlow's absl put on an earlier stderr (pytest's capture).
    """
    configuration.configure()  # import-linter's readers and graph builder
    return use_cases.lint_imports(config_filename=config, cache_dir=None, no_logo=True)


def import_circles(package: str) -> List[str]:
    """Each import circle among ``package``'s modules (a strongly connected component of
    the module graph, late imports included), as lines naming every import in it."""
    graph = grimp.build_graph(package, cache_dir=None)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph.modules)))
    order, lowest, stack, on_stack, circles = {}, {}, [], set(), []

    def visit(module: str) -> None:  # Tarjan's strongly connected components
        order[module] = lowest[module] = len(order)
        stack.append(module)
        on_stack.add(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported not in order:
                visit(imported)
                lowest[module] = min(lowest[module], lowest[imported])
            elif imported in on_stack:
                lowest[module] = min(lowest[module], order[imported])
        if lowest[module] == order[module]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == module:
                    break
            if len(component) > 1:
                circles.append(describe_circle(graph, component))

    for module in sorted(graph.modules):
        if module not in order:
            visit(module)
    return circles


def describe_circle(graph, component: set) -> str:
    imports = []
    for importer in sorted(component):
        for imported in sorted(graph.find_modules_directly_imported_by(importer) & component):
            for detail in graph.get_import_details(importer=importer, imported=imported):
                imports.append(f"  {importer} -> {imported} (l.{detail['line_number']})")
    return f"circle of {len(component)} modules:\n" + "\n".join(imports)


def test_rl_keeps_its_layers(capsys):
    kept = lint_layers(CONFIG)
    report = capsys.readouterr().out
    print(report)  # shown by pytest when the test fails: the import chains, with lines
    assert kept, report
    assert "1 kept, 0 broken" in report


def test_rl_has_no_import_circle():
    circles = import_circles("rl")
    assert circles == [], "\n".join(circles)


@pytest.fixture
def planted_copy(tmp_path, monkeypatch):
    """A copy of rl named rl_planted, whose rl/files.py imports rl.experiment at its end
    (an upward import, and a circle: the experiment imports files), and its config."""
    shutil.copytree(
        os.path.join(ROOT, "rl"),
        tmp_path / PLANTED,
        ignore=shutil.ignore_patterns("__pycache__", "*.so"),
    )
    for path in (tmp_path / PLANTED).rglob("*.py"):
        text = path.read_text()
        path.write_text(re.sub(r"\b(from|import) rl\b", rf"\1 {PLANTED}", text))
    files = tmp_path / PLANTED / "files.py"
    line = len(files.read_text().splitlines()) + 1
    with open(files, "a") as f:
        f.write(f"import {PLANTED}.experiment  # noqa: E402\n")
    config = open(CONFIG).read()
    config = re.sub(r"(root_package = )rl\n", rf"\1{PLANTED}\n", config)
    config = re.sub(r"(containers =\n\s+)rl\n", rf"\1{PLANTED}\n", config)
    (tmp_path / "importlinter.ini").write_text(config)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path / "importlinter.ini", line


def test_an_upward_import_breaks_the_layers_naming_the_import(planted_copy, capsys):
    config, line = planted_copy
    kept = lint_layers(str(config))
    report = capsys.readouterr().out
    print(report)
    assert not kept
    assert "0 kept, 1 broken" in report
    assert f"{PLANTED}.files is not allowed to import {PLANTED}.experiment:" in report
    assert f"{PLANTED}.files -> {PLANTED}.experiment (l.{line})" in report


def test_a_planted_circle_is_found_naming_the_import(planted_copy):
    _, line = planted_copy
    (circle,) = import_circles(PLANTED)
    print(circle)
    assert f"  {PLANTED}.files -> {PLANTED}.experiment (l.{line})" in circle.splitlines()
