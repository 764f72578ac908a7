"""rl's import layers and scripts/bench's (declared once, in .importlinter) and the
absence of import circles in rl.

The layers are checked by import-linter, in process, as ``lint-imports`` does from the
repository root; the circles by grimp, the graph library under it (import-linter's own
acyclic contract works on packages, and rl.algos and rl.models import each other's
modules without a circle among the modules). Each check is also run on copies of rl and
scripts with planted imports (upward, between siblings, a circle through a package's
``__init__.py``), and must fail naming each.
"""

import os
import re
import shutil
import sys
from typing import Dict, List, Set

import grimp
import pytest
from importlinter import configuration
from importlinter.application import use_cases

pytestmark = pytest.mark.unit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(ROOT, ".importlinter")
# rl's, rl/cli's and scripts/bench's.
CONTRACTS = open(CONFIG).read().count("[importlinter:contract:")
SUFFIX = "_planted"
PLANTED = f"rl{SUFFIX}"


def lint_layers(config: str) -> bool:
    """Runs the contracts of ``config`` as ``lint-imports`` does (report on stdout).

    import-linter's use case, not its command: the command also sets up logging, which
    closes the handlers TensorFlow's absl put on an earlier stderr (pytest's capture).
    """
    configuration.configure()  # import-linter's readers and graph builder
    return use_cases.lint_imports(config_filename=config, cache_dir=None, no_logo=True)


def package_edges(graph, package: str) -> Dict[str, Set[str]]:
    """The module graph of ``package``, with the imports of packages that an import runs
    without naming them, since a circle may run through a package's ``__init__.py``.

    Importing ``a.b.c`` first runs ``a/b/__init__.py`` unless the importer is inside
    ``a.b`` (then it has begun already); ``from a.b import c`` reads ``a.b``'s names,
    which are half made while ``a/b/__init__.py`` runs, wherever the importer is. The root
    package is left out: rl/__init__.py is the public face, whose one late import
    (rl.experiment) runs only when a user reads ``rl.Experiment``, never from rl's modules.
    """
    edges = {
        module: set(graph.find_modules_directly_imported_by(module)) for module in graph.modules
    }
    for importer, imported_modules in edges.items():
        for imported in list(imported_modules):
            for above in packages_above(imported, package):
                if above == importer:
                    continue
                if above not in packages_above(importer, package) or any(
                    re.match(rf"\s*from\s+{re.escape(above)}\s+import\b", detail["line_contents"])
                    for detail in graph.get_import_details(importer=importer, imported=imported)
                ):
                    imported_modules.add(above)
    return edges


def packages_above(module: str, package: str) -> List[str]:
    """The packages holding ``module``, outermost first, without the root ``package``."""
    parts = module.split(".")
    return [".".join(parts[:end]) for end in range(2, len(parts)) if parts[0] == package]


def import_circles(package: str) -> List[str]:
    """Each import circle among ``package``'s modules (a strongly connected component of
    the module graph, late imports and packages' ``__init__.py`` included), as lines
    naming every import in it."""
    graph = grimp.build_graph(package, cache_dir=None)
    edges = package_edges(graph, package)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph.modules)))
    order, lowest, stack, on_stack, circles = {}, {}, [], set(), []

    def visit(module: str) -> None:  # Tarjan's strongly connected components
        order[module] = lowest[module] = len(order)
        stack.append(module)
        on_stack.add(module)
        for imported in edges[module]:
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
                circles.append(describe_circle(graph, edges, component))

    for module in sorted(graph.modules):
        if module not in order:
            visit(module)
    return circles


def describe_circle(graph, edges: Dict[str, Set[str]], component: set) -> str:
    """One line per import in the circle; a package reached through an import of a module
    inside it is named with that import's line ("(l.27, runs rl.envs's __init__)")."""
    imports = []
    for importer in sorted(component):
        for imported in sorted(edges[importer] & component):
            named = graph.find_modules_directly_imported_by(importer)
            if imported in named:
                details = graph.get_import_details(importer=importer, imported=imported)
                for detail in details:
                    imports.append(f"  {importer} -> {imported} (l.{detail['line_number']})")
                continue
            for inside in sorted(m for m in named if m.startswith(imported + ".")):
                for detail in graph.get_import_details(importer=importer, imported=inside):
                    imports.append(
                        f"  {importer} -> {imported} (l.{detail['line_number']}, "
                        f"runs {imported}'s __init__)"
                    )
    return f"circle of {len(component)} modules:\n" + "\n".join(imports)


def test_rl_keeps_its_layers(capsys):
    kept = lint_layers(CONFIG)
    report = capsys.readouterr().out
    print(report)  # shown by pytest when the test fails: the import chains, with lines
    assert kept, report
    assert f"{CONTRACTS} kept, 0 broken" in report


def test_rl_has_no_import_circle():
    circles = import_circles("rl")
    assert circles == [], "\n".join(circles)


@pytest.fixture
def rl_copy(tmp_path, monkeypatch):
    """Copies of rl and scripts named rl_planted and scripts_planted (importable), and
    their import-linter config."""
    for package in ("rl", "scripts"):
        shutil.copytree(
            os.path.join(ROOT, package),
            tmp_path / f"{package}{SUFFIX}",
            ignore=shutil.ignore_patterns("__pycache__", "*.so"),
        )
    for path in tmp_path.rglob("*.py"):
        text = path.read_text()
        path.write_text(re.sub(r"\b(from|import) (rl|scripts)\b", rf"\1 \2{SUFFIX}", text))
    config = open(CONFIG).read()
    # The packages' names where the config names modules: "    rl", "    rl.envs.check -> ..."
    config = re.sub(r"(?<![\w.])(rl|scripts)(?=\.\w|$)", rf"\1{SUFFIX}", config, flags=re.M)
    (tmp_path / "importlinter.ini").write_text(config)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def plant(copy, module_file: str, statement: str) -> int:
    """Appends ``statement`` to ``module_file`` (a path in the copy, "rl_planted/files.py");
    returns the line number of its last line."""
    path = copy / module_file
    with open(path, "a") as f:
        f.write(f"{statement}  # noqa: E402\n")
    return len(path.read_text().splitlines())


@pytest.fixture
def planted_copy(rl_copy):
    """The copy whose rl/files.py imports rl.experiment at its end (an upward import, and
    a circle: the experiment imports files), and its config."""
    line = plant(rl_copy, f"{PLANTED}/files.py", f"import {PLANTED}.experiment")
    return rl_copy / "importlinter.ini", line


def one_broken_contract(config: str, capsys) -> str:
    """The report of the contracts in ``config``, one of which (the planted one) broke."""
    kept = lint_layers(config)
    report = capsys.readouterr().out
    print(report)
    assert not kept
    assert f"{CONTRACTS - 1} kept, 1 broken" in report
    return report


def test_an_upward_import_breaks_the_layers_naming_the_import(planted_copy, capsys):
    config, line = planted_copy
    report = one_broken_contract(str(config), capsys)
    assert f"{PLANTED}.files is not allowed to import {PLANTED}.experiment:" in report
    assert f"{PLANTED}.files -> {PLANTED}.experiment (l.{line})" in report


def test_a_planted_circle_is_found_naming_the_import(planted_copy):
    _, line = planted_copy
    (circle,) = import_circles(PLANTED)
    print(circle)
    assert f"  {PLANTED}.files -> {PLANTED}.experiment (l.{line})" in circle.splitlines()


@pytest.mark.parametrize(
    "module_file, importer, statement",
    [
        # rl.envs's __init__ imports registered, which imports registry: importing a module
        # of rl.envs from registry runs that __init__ first.
        ("registry.py", "registry", f"import {PLANTED}.envs.mujoco_log"),
        # From inside rl.envs, reading the half-made package (the circle once in make.py).
        ("envs/make.py", "envs.make", f"from {PLANTED}.envs import mujoco_log"),
    ],
)
def test_a_planted_circle_through_a_package_init_is_found(
    rl_copy, module_file, importer, statement
):
    line = plant(rl_copy, f"{PLANTED}/{module_file}", statement)
    importer, package = f"{PLANTED}.{importer}", f"{PLANTED}.envs"
    plain = grimp.build_graph(PLANTED, cache_dir=None)
    assert package not in plain.find_modules_directly_imported_by(importer)  # grimp alone misses it
    (circle,) = import_circles(PLANTED)
    print(circle)
    lines = circle.splitlines()
    assert f"  {importer} -> {package} (l.{line}, runs {package}'s __init__)" in lines
    assert any(text.startswith(f"  {package} -> {PLANTED}.envs.registered (l.") for text in lines)


def test_a_late_upward_import_a_sibling_import_and_an_unplaced_module_break_the_bench_layers(
    rl_copy, capsys
):
    bench = f"scripts{SUFFIX}.bench"
    late = plant(
        rl_copy,
        f"scripts{SUFFIX}/bench/children.py",
        f"\n\ndef late():\n    from {bench} import cli",
    )
    sibling = plant(
        rl_copy, f"scripts{SUFFIX}/bench/suite.py", f"from {bench}.tables import run_table"
    )
    (rl_copy / f"scripts{SUFFIX}" / "bench" / "extra.py").write_text("")
    report = one_broken_contract(str(rl_copy / "importlinter.ini"), capsys)
    assert f"{bench}.children -> {bench}.cli (l.{late})" in report
    assert f"{bench}.suite -> {bench}.tables (l.{sibling})" in report
    assert f"- {bench}.extra" in report


def test_an_upward_import_and_a_sibling_import_break_the_cli_layers(rl_copy, capsys):
    cli = f"{PLANTED}.cli"
    upward = plant(rl_copy, f"{PLANTED}/cli/flag_table.py", f"from {cli} import jobs")
    sibling = plant(rl_copy, f"{PLANTED}/cli/testing.py", f"from {cli} import training")
    report = one_broken_contract(str(rl_copy / "importlinter.ini"), capsys)
    assert f"{cli}.flag_table -> {cli}.jobs (l.{upward})" in report
    assert f"{cli}.testing -> {cli}.training (l.{sibling})" in report
