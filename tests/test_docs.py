"""The docs' generated tables agree with the code, and the site builds with --strict."""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rl import catalog, registry  # noqa: F401  (fills the registries)
from rl.fields import Limits

ROOT = Path(__file__).resolve().parent.parent


def load_docs_script():
    spec = importlib.util.spec_from_file_location("docs_script", ROOT / "scripts" / "docs.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


docs = load_docs_script()


@pytest.mark.unit
def test_readme_generated_blocks_are_fresh():
    stale = docs.stale_blocks(ROOT / "README.md")
    assert stale == [], (
        f"README.md's generated blocks {stale} are stale: run `{docs.WRITE_COMMAND}`"
    )


@pytest.mark.unit
def test_a_stale_block_is_named(tmp_path):
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    rows = [line for line in readme.splitlines() if line.startswith("| `ppo` |")]
    assert len(rows) == 1, "README.md's algorithm table has no `ppo` row"
    planted = tmp_path / "README.md"
    planted.write_text(readme.replace(rows[0] + "\n", ""), encoding="utf-8")
    assert docs.stale_blocks(planted) == ["algorithms"]


@pytest.mark.unit
def test_fill_blocks_replaces_only_the_body_and_refuses_an_unknown_block():
    text = "a\n<!-- generated: x -->\nold\n<!-- end -->\nb\n"
    assert docs.fill_blocks(text, {"x": lambda: "new\n"}) == (
        "a\n<!-- generated: x -->\nnew\n<!-- end -->\nb\n"
    )
    with pytest.raises(KeyError, match="unknown generated block 'y'"):
        docs.fill_blocks("<!-- generated: y -->\n<!-- end -->", {"x": lambda: ""})


@pytest.mark.unit
def test_the_algorithm_table_names_every_agent_with_a_set_of_its_own():
    table = docs.algorithms_table()
    rows = [line for line in table.splitlines()[2:]]
    agents = [row.split("|")[1].strip().strip("`") for row in rows]
    assert agents == registry.agents.names()
    for agent, row in zip(agents, rows):
        example = row.split("--hparams ")[1].split()[0]
        assert registry.hparams.get(example)().agent == agent


@pytest.mark.unit
def test_the_set_table_lists_every_set_with_its_agent_env_and_budget():
    rows = docs.sets_table().splitlines()[2:]
    listed = {}
    for row in rows:
        cells = [cell.strip() for cell in row.split("|")[1:-1]]
        listed[cells[0].strip("`")] = (cells[1], cells[2], int(cells[3].replace(",", "")))
    expected = {}
    for name in registry.hparams.names():
        hp = registry.hparams.get(name)()
        expected[name] = (hp.agent, hp.env, hp.train_steps)
    assert listed == expected


@pytest.mark.unit
def test_every_set_and_every_agents_class_says_what_it_is():
    sets = docs.hparam_sets()
    assert [s.name for s in sets if not s.description] == []
    classes = {type(s.hparams) for s in sets}
    assert sorted(c.__name__ for c in classes if not docs.own_docstring(c)) == []


@pytest.mark.unit
@pytest.mark.parametrize(
    "limits, text",
    [
        (Limits(low=0, high=1), "[0, 1]"),
        (Limits(low=0, open_low=True), "(0, inf)"),
        (Limits(low=1, high=4096, max_items=8), "each in [1, 4096], at most 8 items"),
        (Limits(choices=("sync", "async")), "one of `sync`, `async`"),
        (Limits(kind="envs"), "a registered name (envs) or Gymnasium id"),
        (None, ""),
    ],
)
def test_limits_in_words(limits, text):
    assert docs.describe_limits(limits) == text


@pytest.mark.unit
def test_the_field_reference_gives_each_fields_type_default_range_and_comment():
    reference = docs.hparams_reference()
    assert "| `gamma` | float | `0.99` | [0, 1] | discount |" in reference, (
        "HParams.gamma's row (declared as bounded(0.99, 0, 1) with the comment 'discount')"
    )
    assert (
        "| `hidden_sizes` | list of int | `[64,64]` | each in [1, 4096], at most 8 items |"
        in reference
    )


@pytest.mark.unit
def test_the_flag_reference_lists_every_flag_of_train_py():
    from absl import flags

    reference = docs.flags_reference()
    names = [row.split("|")[1].strip().strip("`") for row in reference.splitlines()[2:]]
    assert len(names) == len(set(names))
    for name in ("--hparams", "--output_dir", "--num_workers", "--copies", "--sys"):
        assert name in names
    assert "| `--copies` | int | `1` | [1, 1000] |" in reference
    assert all(name[2:] in flags.FLAGS for name in names)


@pytest.mark.unit
def test_results_tables_come_from_the_result_files(tmp_path):
    result = {
        "set": "ppo_cartpole",
        "algorithm": "ppo",
        "env": "CartPole-v1",
        "train_steps": 100000,
        "command": "python train.py --hparams ppo_cartpole --copies 3",
        "final_returns": [400.0, 500.0, 100.0],
        "eval_episodes": 10,
        "peer": {"name": "RL-Zoo", "value": 500, "train_steps": 100000},
        "machine": {"tf_call_ms": 0.2, "numpy_mlp_ms": 0.01, "cartpole_step_ms": 0.006},
        "date": "2026-11-28",
        "unknown_field": "ignored",
    }
    (tmp_path / "ppo_cartpole.json").write_text(json.dumps(result))
    results = docs.load_results(tmp_path)
    table = docs.results_table(results)
    # rliable's IQM of fewer than four values is their mean: 333.3. A file from before the
    # suite recorded each seed's best shows that it did not; 1 of the 3 reaches 475.
    assert (
        "| [`ppo_cartpole`](#result-ppo-cartpole) | CartPole-v1 | 100,000 | 3 | 333.3 | 1/3 | "
        "not recorded | - | RL-Zoo: 500 at 100,000 | - |" in table
    )
    grid = docs.results_grid(results, link="docs/benchmarks.md")
    assert "| ppo | [333](docs/benchmarks.md#result-ppo-cartpole) n=3 (500) |" in grid
    made = docs.provenance(results)
    assert "- command: `python train.py --hparams ppo_cartpole --copies 3`" in made
    assert "compiled TF call 0.2 ms, NumPy MLP 0.01 ms, CartPole step 0.006 ms" in made
    assert "- best evaluations: not recorded" in made
    assert "- solved at: 475 (1/3 seeds)" in made


@pytest.mark.unit
def test_a_cell_shows_its_best_evaluation_solved_seeds_and_peer_runs(tmp_path):
    # A file as the suite writes it, with a peer's runs over the same seeds.
    result = {
        "set": "sac_pendulum", "algorithm": "sac", "env": "Pendulum-v1", "train_steps": 20000,
        "command": "python scripts/benchmark.py --suite classic --only sac_pendulum",
        "copies": 4, "seeds": [7, 8, 9, 10], "final_returns": [-150.0, -180.0, -210.0, -160.0],
        "best_returns": [-140.0, -150.0, -190.0, -155.0], "eval_episodes": 10,
        "solved_threshold": -200.0, "iqm": -170.0, "ci95": [-195.0, -155.0],
        "best_iqm": -152.5, "best_ci95": [-170.0, -147.5], "solved_fraction": 0.75,
        "peer_runs": {"name": "SB3 SAC", "command": "python scripts/benchmark.py --_peer_run",
                      "seeds": [7, 8, 9, 10], "final_returns": [-170.0, -175.0, -300.0, -165.0]},
        "peer_iqm": -172.5, "peer_ci95": [-237.5, -167.5], "poi_vs_peer": 0.6875,
        "poi_vs_peer_ci95": [0.25, 1.0], "machine": None, "date": "2026-12-07",
    }  # fmt: skip
    (tmp_path / "sac_pendulum.json").write_text(json.dumps(result))
    table = docs.results_table(docs.load_results(tmp_path))
    assert (
        "| [`sac_pendulum`](#result-sac-pendulum) | Pendulum-v1 | 20,000 | 4 | "
        "-170.0 [-195.0, -155.0] | 3/4 | -152.5 [-170.0, -147.5] | "
        "SB3 SAC: -172.5 [-237.5, -167.5] (4 seeds); P(rl > peer) 0.69 [0.25, 1.00] | - | - |"
        in table
    )
    made = docs.provenance(docs.load_results(tmp_path))
    assert "- seeds, in copy order: 7, 8, 9, 10" in made
    assert "- best evaluations: -140, -150, -190, -155" in made
    assert "- peer's final returns: -170, -175, -300, -165" in made


@pytest.mark.unit
def test_every_result_file_names_its_command_and_a_registered_set():
    results = docs.load_results()
    assert results, "docs/results/ holds no result"
    for result in results:
        assert result["command"].startswith("python "), result["file"]
        assert result["set"] in registry.hparams, result["file"]
        assert "machine" in result and "date" in result, result["file"]


def build_site(config: Path, site: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), NO_MKDOCS_2_WARNING="1")
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


@pytest.mark.process
def test_the_site_builds_with_strict(tmp_path):
    pytest.importorskip("mkdocs", reason="the docs extra: pip install -e '.[docs]'")
    built = build_site(ROOT / "mkdocs.yml", tmp_path / "site")
    assert built.returncode == 0, built.stderr[-3000:]
    flags_page = (tmp_path / "site" / "reference" / "flags" / "index.html").read_text()
    assert "<code>--copies_parallel</code>" in flags_page  # a row of the generated table
    hparams_page = (tmp_path / "site" / "reference" / "hparams" / "index.html").read_text()
    assert "<code>gae_lambda</code>" in hparams_page
    # The dated notes are built (pages link them) but not in the navigation.
    assert (tmp_path / "site" / "notes" / "classic-suite" / "index.html").exists()
    assert "notes/classic-suite" not in (tmp_path / "site" / "index.html").read_text()
    benchmarks = (tmp_path / "site" / "benchmarks" / "index.html").read_text()
    assert "performance profile" in benchmarks and "Pendulum-v1" in benchmarks


@pytest.mark.process
def test_a_broken_link_fails_the_strict_build(tmp_path):
    pytest.importorskip("mkdocs", reason="the docs extra: pip install -e '.[docs]'")
    copy = tmp_path / "repo"
    shutil.copytree(ROOT / "docs", copy / "docs")
    shutil.copytree(ROOT / "scripts", copy / "scripts")
    shutil.copy(ROOT / "mkdocs.yml", copy / "mkdocs.yml")
    shutil.copy(ROOT / "README.md", copy / "README.md")
    (copy / "rl").symlink_to(ROOT / "rl")
    page = copy / "docs" / "benchmarks.md"
    page.write_text(page.read_text() + "\n[gone](no-such-page.md)\n")
    built = build_site(copy / "mkdocs.yml", tmp_path / "site")
    assert built.returncode != 0
    assert "no-such-page.md" in built.stderr
