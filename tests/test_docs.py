"""The README's tables agree with the registries they describe."""

import os
import re

import pytest

from rl import catalog, registry  # noqa: F401  (fills the registries)

pytestmark = pytest.mark.unit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def readme() -> str:
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        return f.read()


def test_the_hparam_set_table_lists_every_set_with_its_agent_env_and_budget():
    rows = re.findall(r"^\| `(\w+)` \| (\w+) \| ([^|]+?) \| ([\d,]+) \| .+ \|$", readme(), re.M)
    listed = {name: (agent, env, int(steps.replace(",", ""))) for name, agent, env, steps in rows}
    expected = {}
    for name in registry.hparams.names():
        hp = registry.hparams.get(name)()
        expected[name] = (hp.agent, hp.env, hp.train_steps)
    assert listed == expected


def test_the_algorithm_table_names_every_agent_with_a_command_that_uses_it():
    rows = re.findall(
        r"^\| [^|]+ \| `(\w+)` \| [^|]+ \| `python train.py [^`]*--hparams (\w+)", readme(), re.M
    )
    assert sorted(agent for agent, _ in rows) == sorted(registry.agents.names())
    for agent, hparams in rows:
        assert registry.hparams.get(hparams)().agent == agent
