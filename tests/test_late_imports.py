"""rl's late imports (an import inside a function) are only for the dependencies listed here.

A late import hides what a module needs and can hide an import circle, so it is kept for
a dependency that is optional (an extra of setup.py) or slow to load where a fast answer is
promised (TensorFlow before the early checks; ``train.py --help`` and a flag error). Each
late import names its dependency: an import of a package below by its name, an import of
one of rl's modules by its comment (on its line or the comment block right above), since
what it loads is not in the statement.
"""

import ast
import os
import re
from typing import Iterator, List, Tuple

import pytest

pytestmark = pytest.mark.unit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Each dependency that may be imported late: its name (as a comment names it), its
# top-level packages, and why.
ALLOWED = {
    # Loaded only once the early checks passed, so bad input is answered in under a second.
    "TensorFlow": ("tensorflow", "tensorflow_probability", "keras", "tf_keras"),
    # Optional extras (setup.py): ray, remote, tracking, search, atari, mujoco.
    "Ray": ("ray",),
    "gRPC": ("grpc", "grpc_tools"),
    "MLflow": ("mlflow",),
    "Optuna": ("optuna", "yaml"),
    "ale-py": ("ale_py",),
    "MuJoCo": ("mujoco",),
    # The games and multiagent extras: multi-agent envs and their checks.
    "PettingZoo": ("pettingzoo", "mpe2"),
    # Core, but kept off the start-up of train.py, python -m rl.search and their flag
    # errors. Measured on the 2-core machine (docs/concepts/architecture.md, "Late imports"):
    # after rl.cli's modules, Gymnasium adds 0.1 s and TensorBoard 0.15 s, and the rl modules that
    # need them (catalog, early checks, analysis...) 0.3-0.45 s more: a flag error's
    # 0.35 s would become 0.9 s.
    "Gymnasium": ("gymnasium",),
    "TensorBoard": ("tensorboard",),
    # Core; rliable loads arch, pandas and scipy (about 1 s) for the IQM and its bootstrap
    # interval, which only --copies' summary, tests of copies and searches compute.
    "rliable": ("rliable",),
    # Core; 1.1-1.4 s to load, for a plot that few commands draw.
    "Matplotlib": ("matplotlib",),
    # Core; the screen viewer only (--render): its import starts SDL.
    "pygame": ("pygame",),
}
# A module that ``python -m`` runs must not be imported before it (runpy warns): its
# importers import it late, with a comment naming the command.
RUN_AS_MAIN = "python -m"


def late_imports(path: str) -> Iterator[Tuple[int, List[str], str]]:
    """Each import inside a function of the file at ``path``: its line, the modules it
    names, and the comments that justify it: its own, and the comment lines right above
    it or above the imports it follows."""
    with open(path, encoding="utf-8") as f:
        source = f.read()
    lines = source.splitlines()
    seen = set()
    for function in ast.walk(ast.parse(source, path)):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(function):
            if not isinstance(node, (ast.Import, ast.ImportFrom)) or node.lineno in seen:
                continue
            seen.add(node.lineno)
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            else:
                modules = [node.module or ""]
            own = lines[node.lineno - 1 : node.end_lineno]
            block = []  # the comment lines above the imports this one follows
            row = node.lineno - 2
            while row >= 0 and re.match(r"\s*(#|from |import )", lines[row]):
                if lines[row].lstrip().startswith("#"):
                    block.append(lines[row])
                row -= 1
            comments = " ".join(line.split("#", 1)[1] for line in own + block if "#" in line)
            yield node.lineno, modules, comments


def unjustified_late_imports(folder: str) -> List[str]:
    """One line per late import under ``folder`` that ALLOWED does not cover."""
    faults = []
    for directory, _, names in os.walk(folder):
        for name in sorted(names):
            if not name.endswith(".py") or name.endswith("_pb2.py") or "_pb2_" in name:
                continue
            path = os.path.join(directory, name)
            where = os.path.relpath(path, os.path.dirname(folder))
            for line, modules, comments in late_imports(path):
                for module in modules:
                    top = module.split(".")[0]
                    if top == "rl":
                        named = [dep for dep in ALLOWED if dep.lower() in comments.lower()]
                        if not named and RUN_AS_MAIN not in comments:
                            faults.append(
                                f"{where}:{line} imports {module} late without naming "
                                f"a dependency of the allowed list"
                            )
                    elif not any(top in packages for packages in ALLOWED.values()):
                        faults.append(f"{where}:{line} imports {module} late: import it at the top")
    return faults


def test_every_late_import_in_rl_names_an_allowed_dependency():
    faults = unjustified_late_imports(os.path.join(ROOT, "rl"))
    assert faults == [], "\n".join(faults)


def test_a_late_import_of_the_standard_library_or_without_a_reason_is_named(tmp_path):
    package = tmp_path / "rl"
    package.mkdir()
    (package / "a.py").write_text(
        "def f():\n"
        "    import json\n"
        "    from rl import b\n"
        "    from rl import c  # late: it loads TensorBoard\n"
        "    from rl import e\n"
        "    # late: it loads TensorFlow\n"
        "    from rl import d\n"
        "    import ray\n"
    )
    assert unjustified_late_imports(str(package)) == [
        "rl/a.py:2 imports json late: import it at the top",
        "rl/a.py:3 imports rl late without naming a dependency of the allowed list",
        "rl/a.py:5 imports rl late without naming a dependency of the allowed list",
    ]
