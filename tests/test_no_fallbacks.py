"""No attribute fallback on hparams or settings in rl/: ``getattr(hp, "torso", "mlp")``
turns a misspelt or missing field into a silent default. A field an object may lack is
asked for through a capability instead (``isinstance(hp, ModelSettings)``)."""

import ast
import os
import re
from typing import List

import pytest

pytestmark = pytest.mark.unit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# What hparams or settings objects are called in rl/ (hp, self.hp, type(hp), spec.hparams,
# settings, model_settings, ...).
SETTINGS_NAME = re.compile(r"\b(hp|hparams|\w*settings)\b")


def fallbacks(source: str, filename: str) -> List[str]:
    """``file:line: call`` of each getattr with a default, or hasattr, on hparams or settings."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            continue
        with_default = node.func.id == "getattr" and len(node.args) == 3
        if not (with_default or node.func.id == "hasattr") or not node.args:
            continue
        if SETTINGS_NAME.search(ast.unparse(node.args[0])):
            found.append(f"{filename}:{node.lineno}: {ast.unparse(node)}")
    return found


@pytest.mark.parametrize(
    "line",
    [
        'x = getattr(hp, "torso", "mlp")',
        'x = getattr(self.hp, "train_interval", 1)',
        'x = getattr(settings, "action_mask", False)',
        'x = getattr(type(hp), "checkpoint_shape_fields", ())',
        'x = hasattr(spec.hparams, "noisy")',
    ],
)
def test_a_planted_fallback_is_found(line):
    call = ast.unparse(ast.parse(line).body[0].value)
    assert fallbacks(line, "planted.py") == [f"planted.py:1: {call}"]


@pytest.mark.parametrize(
    "line",
    [
        "x = getattr(hp, name)",  # a field named by a variable, without a default
        'x = getattr(self.model, "normalizer", None)',  # not hparams
        'x = isinstance(hp, ModelSettings) and hp.torso != "mlp"',
    ],
)
def test_what_is_not_a_fallback_on_hparams_passes(line):
    assert fallbacks(line, "fine.py") == []


def test_rl_has_no_fallback_on_hparams_or_settings():
    found = []
    for folder, _, files in os.walk(os.path.join(ROOT, "rl")):
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                with open(path, encoding="utf-8") as f:
                    found += fallbacks(f.read(), os.path.relpath(path, ROOT))
    assert not found, "fallbacks that hide a typo:\n" + "\n".join(found)
