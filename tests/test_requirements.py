"""Every third-party import is provided by a requirement that setup.py declares.

A package installed by hand on a developer's machine must not hide a missing
requirement: this lists the top-level imports of rl/, scripts/, train.py and
tests/ and maps each to the distribution that provides it.
"""

import ast
import importlib.metadata as metadata
import os
import re
import sys

import pytest

pytestmark = pytest.mark.unit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCES = ["rl", "scripts", "tests", "train.py"]


def python_files():
    for source in SOURCES:
        path = os.path.join(ROOT, source)
        if os.path.isfile(path):
            yield path
        for folder, _, names in os.walk(path):
            yield from (os.path.join(folder, n) for n in names if n.endswith(".py"))


def top_level_imports(path):
    """(module, line) of every absolute import in a file, including lazy ones."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name.split(".")[0], node.lineno
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module.split(".")[0], node.lineno


def canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def declared_requirements():
    """Distribution names in setup.py's install_requires and every extra."""
    with open(os.path.join(ROOT, "setup.py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg in ("install_requires", "extras_require"):
            for constant in ast.walk(node.value):
                if isinstance(constant, ast.Constant) and isinstance(constant.value, str):
                    names.add(canonical(re.match(r"[A-Za-z0-9_.-]*", constant.value).group(0)))
    return names


# The package, train.py, scripts/ (its benchmark's package), and the modules beside the
# tests (conftest, shared helpers).
LOCAL = {"rl", "train", "scripts"} | {
    name[: -len(".py")] for name in os.listdir(os.path.dirname(__file__)) if name.endswith(".py")
}


def undeclared_imports(paths, declared):
    """One line per import that no declared distribution provides."""
    providers = metadata.packages_distributions()
    missing = []
    for path in paths:
        for module, line in top_level_imports(path):
            if module in LOCAL or module in sys.stdlib_module_names:
                continue
            dists = {canonical(d) for d in providers.get(module, [])}
            where = f"{os.path.relpath(path, ROOT)}:{line}: {module}"
            if not dists and canonical(module) in declared:
                continue  # an extra not installed here (torch, stable_baselines3 for bench)
            if not dists:
                missing.append(f"{where} is not installed by any distribution")
            elif not dists & declared:
                missing.append(
                    f"{where} comes from {', '.join(sorted(dists))}, which setup.py does not declare"
                )
    return missing


def test_every_third_party_import_is_declared():
    missing = undeclared_imports(list(python_files()), declared_requirements())
    assert not missing, "undeclared imports:\n" + "\n".join(missing)


def test_an_import_of_an_undeclared_distribution_is_named(tmp_path):
    # werkzeug is installed (TensorBoard needs it) but only a direct declaration counts.
    source = tmp_path / "uses_werkzeug.py"
    source.write_text("import json\nfrom werkzeug.test import Client\nimport rl.registry\n")
    declared = declared_requirements() - {"werkzeug"}
    (line,) = undeclared_imports([str(source)], declared)
    assert ":2: werkzeug comes from werkzeug" in line
    assert undeclared_imports([str(source)], declared | {"werkzeug"}) == []


def test_setup_declares_what_a_fresh_machine_lacks():
    declared = declared_requirements()
    for name in ("tensorflow", "tensorboard", "gymnasium", "pytest", "hypothesis", "werkzeug"):
        assert name in declared


def requirement_names(lines):
    return {
        canonical(re.match(r"[A-Za-z0-9_.-]*", line.strip()).group(0))
        for line in lines
        if line.strip() and not line.lstrip().startswith("#")
    }


def test_the_tpu_requirements_name_every_install_requirement():
    # deploy/tpu/requirements.txt swaps TensorFlow for its TPU build and leaves tf-keras to
    # a --no-deps install (docs/guides/tpu.md); everything else must be the same packages.
    with open(os.path.join(ROOT, "setup.py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    (install,) = [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.keyword) and node.arg == "install_requires"
    ]
    needed = requirement_names(c.value for c in install.elts)
    with open(os.path.join(ROOT, "deploy", "tpu", "requirements.txt"), encoding="utf-8") as f:
        tpu = requirement_names(f)
    assert tpu == (needed - {"tensorflow", "tf-keras"}) | {"tensorflow-tpu"}
