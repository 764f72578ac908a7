"""Generates the docs' tables from the code and the result files, so that no prose lists them.

Every table that lists algorithms, hparam sets, hparam fields, train.py's flags, benchmark
results or the import layers is built here: from the registries (after ``import rl.catalog``),
the field metadata of rl/fields.py, absl's definitions of train.py's flags,
docs/results/*.json and .importlinter. A page (or README.md) holds a marked block::

    <!-- generated: algorithms -->
    ...
    <!-- end -->

README.md's blocks are written into the file (``python scripts/docs.py --write``; a unit test
fails while they are stale). The site's pages keep their blocks empty: scripts/mkdocs_hooks.py
fills them while ``mkdocs build`` runs, so no generated page is committed.

    python scripts/docs.py --write     # rewrite README.md's generated blocks
    python scripts/docs.py --check     # exit 1 naming README.md's stale blocks
    python scripts/docs.py --show NAME # print one block (algorithms, sets, flags, ...)
"""

from __future__ import annotations

import argparse
import ast
import configparser
import dataclasses
import functools
import glob
import inspect
import io
import os
import re
import sys
import tokenize
import typing
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: rl is the checkout's own
    sys.path.insert(0, str(ROOT))

from rl import catalog, registry  # noqa: E402, F401  (catalog fills the registries)
from rl.analysis import interquartile_mean  # noqa: E402
from rl.fields import Limits  # noqa: E402
from rl.hparams.base import HParams, declared_limits, format_value, type_name  # noqa: E402
from scripts.bench import scores  # noqa: E402  (the solved thresholds and random play)

README = ROOT / "README.md"
RESULTS_DIR = ROOT / "docs" / "results"
IMPORT_LAYERS = ROOT / ".importlinter"
LAYERS_CONTRACT = "importlinter:contract:layers"
WRITE_COMMAND = "python scripts/docs.py --write"
# A block: its opening marker names the generator; everything up to `<!-- end -->` is its text.
BLOCK = re.compile(r"(<!-- generated: ([\w-]+) -->\n)(.*?)(<!-- end -->)", re.S)
# Sets that exist for tests or as the base of others: listed, never picked as an example.
FIXTURE_SUFFIXES = ("_tiny", "_base")
# Links from README (at the repository's root) into the site's pages.
README_DOCS = "docs/"


# ---------------------------------------------------------------- reading the registries


def first_paragraph(doc: Optional[str]) -> str:
    """A docstring's first paragraph on one line; "" for none."""
    if not doc:
        return ""
    paragraph = inspect.cleandoc(doc).split("\n\n")[0]
    return " ".join(line.strip() for line in paragraph.splitlines()).replace("``", "`")


def own_docstring(cls: type) -> str:
    """The class's own docstring: dataclasses invent one (``Name(field: type = ...)``)."""
    doc = cls.__dict__.get("__doc__") or ""
    return "" if doc.startswith(f"{cls.__name__}(") else first_paragraph(doc)


@dataclasses.dataclass(frozen=True)
class HparamSet:
    """One registered hparam set, built once."""

    name: str
    hparams: HParams
    description: str  # its factory's docstring


def hparam_sets() -> List[HparamSet]:
    """Every registered set, by name."""
    sets = []
    for name in registry.hparams.names():
        factory = registry.hparams.get(name)
        sets.append(HparamSet(name, factory(), first_paragraph(factory.__doc__)))
    return sets


def example_set(agent: str, sets: Sequence[HparamSet]) -> str:
    """The set a newcomer should try first for ``agent``: the quickest that is no fixture."""
    own = [s for s in sets if s.hparams.agent == agent]
    real = [s for s in own if not s.name.endswith(FIXTURE_SUFFIXES)] or own
    return min(real, key=lambda s: (s.hparams.train_steps, s.name)).name


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[str]], align: str = "") -> str:
    """A Markdown table; ``align`` holds one letter per column ("l" or "r"), default left."""
    align = align or "l" * len(header)
    rule = ["---:" if a == "r" else "---" for a in align]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(rule) + "|"]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def algorithms_table(sets: Optional[Sequence[HparamSet]] = None) -> str:
    """One row per registered agent: what it is (its hparams class's docstring), its sets and
    a command that trains it."""
    sets = hparam_sets() if sets is None else sets
    rows = []
    for agent in registry.agents.names():
        own = [s for s in sets if s.hparams.agent == agent]
        if not own:
            raise ValueError(f"agent {agent!r} has no hparam set: register one (rl/hparams/)")
        cls = type(own[0].hparams)
        example = example_set(agent, own)
        rows.append(
            [
                f"`{agent}`",
                own_docstring(cls) or cls.__name__,
                str(len(own)),
                f"`python train.py --hparams {example} --output_dir runs/{agent}`",
            ]
        )
    return markdown_table(["agent", "what it is", "sets", "try it"], rows)


def sets_table(sets: Optional[Sequence[HparamSet]] = None) -> str:
    """One row per registered hparam set: agent, env, budget and its docstring."""
    sets = hparam_sets() if sets is None else sets
    rows = [
        [f"`{s.name}`", s.hparams.agent, s.hparams.env, f"{s.hparams.train_steps:,}", s.description]
        for s in sets
    ]
    return markdown_table(["set", "agent", "env", "train_steps", "what it is"], rows, "lllrl")


# ---------------------------------------------------------------- hparam fields


@functools.lru_cache(maxsize=None)  # read once per class: every subclass asks again
def field_comments(cls: type) -> Dict[str, str]:
    """The comment written with each field in ``cls``'s own body: on the field's lines, else
    the comment lines right above it."""
    try:
        lines, _ = inspect.getsourcelines(cls)
    except (OSError, TypeError):
        return {}
    source = inspect.cleandoc("\n" + "".join(lines)) if lines[0].startswith(" ") else "".join(lines)
    comments: Dict[int, str] = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            comments[token.start[0]] = token.string.lstrip("#").strip()
    code_lines = source.splitlines()
    found = {}
    for node in ast.parse(source).body[0].body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        on_lines = [comments[n] for n in range(node.lineno, node.end_lineno + 1) if n in comments]
        above = []
        line = node.lineno - 1
        while line >= 1 and code_lines[line - 1].strip().startswith("#"):
            above.insert(0, comments[line])
            line -= 1
        found[node.target.id] = " ".join(on_lines or above)
    return found


def describe_limits(limits: Optional[Limits]) -> str:
    """A field's valid values in words: "[0, 1]", "(0, 1e6]", "one of sync, async"."""
    if limits is None:
        return ""
    if limits.choices:
        return "one of " + ", ".join(f"`{c}`" for c in limits.choices)
    if limits.kind:
        return f"a registered name ({limits.kind})" + (
            " or Gymnasium id" if limits.kind == "envs" else ""
        )
    if limits.low is None and limits.high is None:
        return ""
    low = "-inf" if limits.low is None else format_value(limits.low)
    high = "inf" if limits.high is None else format_value(limits.high)
    text = f"{'(' if limits.open_low else '['}{low}, {high}{')' if limits.high is None else ']'}"
    if limits.max_items is not None:
        text = f"each in {text}, at most {limits.max_items} items"
    return text


def field_default(field: dataclasses.Field) -> str:
    if not field.init:  # set by the class from its other fields (DQN's grad_comp)
        return "derived"
    if field.default == "":
        return '`""`'
    if field.default is not dataclasses.MISSING:
        return f"`{format_value(field.default)}`"
    if field.default_factory is not dataclasses.MISSING:
        return f"`{format_value(field.default_factory())}`"
    return "(required)"


def hparams_classes(sets: Sequence[HparamSet]) -> List[type]:
    """Every dataclass the registered sets are built from, bases (HParams, the settings
    mixins) first, then each agent's class, in registry order."""
    agent_classes = []
    for agent in registry.agents.names():
        for s in sets:
            if s.hparams.agent == agent and type(s.hparams) not in agent_classes:
                agent_classes.append(type(s.hparams))
    ordered: List[type] = []
    for cls in agent_classes:
        for klass in reversed(cls.__mro__):
            if dataclasses.is_dataclass(klass) and klass not in ordered:
                ordered.append(klass)
    # HParams first, then the settings every agent mixes in, then the agents' own classes.
    return sorted(ordered, key=lambda k: (k is not HParams, issubclass(k, HParams)))


def anchor(cls: type) -> str:
    return cls.__name__.lower()


def field_description(cls: type, name: str) -> str:
    """The first comment written with field ``name``, from the most basic class declaring it
    (a subclass redeclares a field to change its default, not its meaning)."""
    for klass in reversed(cls.__mro__):
        if name in klass.__dict__.get("__annotations__", {}):
            text = field_comments(klass).get(name, "")
            if text:
                return text
    return ""


def class_reference(cls: type, sets: Sequence[HparamSet]) -> str:
    """One hparams class: its docstring, bases, new fields and the defaults it changes."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    inherited = {
        f.name
        for base in cls.__mro__[1:]
        if dataclasses.is_dataclass(base)
        for f in dataclasses.fields(base)
    }
    own = cls.__dict__.get("__annotations__", {})
    bases = [b for b in cls.__bases__ if dataclasses.is_dataclass(b)]
    parts = [f"### {cls.__name__} {{#{anchor(cls)}}}\n"]
    where = f"`{cls.__module__}`"
    parts.append((own_docstring(cls) + " " if own_docstring(cls) else "") + f"Defined in {where}.")
    if bases:
        parts[-1] += (
            " Has every field of " + ", ".join(f"[{b.__name__}](#{anchor(b)})" for b in bases) + "."
        )
    parts[-1] += "\n"
    new = [name for name in own if name not in inherited]
    if new:
        rows = [
            [
                f"`{name}`",
                type_name(hints[name]),
                field_default(fields[name]),
                describe_limits(declared_limits(cls, name)),
                field_description(cls, name),
            ]
            for name in new
        ]
        parts.append(markdown_table(["field", "type", "default", "range", "what it does"], rows))
    changed = [name for name in own if name in inherited]
    if changed:
        text = ", ".join(f"`{name}` = {field_default(fields[name])}" for name in changed)
        parts.append(f"Defaults here: {text}.\n")
    own_sets = [s.name for s in sets if type(s.hparams) is cls]
    if own_sets:
        parts.append("Sets: " + ", ".join(f"`{name}`" for name in own_sets) + ".\n")
    return "\n".join(parts)


def hparams_reference(sets: Optional[Sequence[HparamSet]] = None) -> str:
    """Every hparams class with every field's type, default, range and description."""
    sets = hparam_sets() if sets is None else sets
    return "\n".join(class_reference(cls, sets) for cls in hparams_classes(sets))


# ---------------------------------------------------------------- train.py's flags


def train_flags() -> List[Any]:
    """train.py's flags as absl holds them, read through its FlagValues after
    rl.cli.flag_table.define_flags() (however that declares them): every flag a module of rl
    defined, in definition order."""
    from absl import flags

    from rl.cli import flag_table

    try:
        flag_table.define_flags()
    except flags.DuplicateFlagError:  # this process defined them already (a test, say)
        pass
    by_module = flags.FLAGS.flags_by_module_dict()
    seen, ours = set(), []
    for module, module_flags in by_module.items():
        if module != "rl" and not module.startswith("rl."):
            continue
        for flag in module_flags:
            if flag.name not in seen:  # a short name is a second key to the same flag
                seen.add(flag.name)
                ours.append(flag)
    return ours


def flag_range(flag: Any) -> str:
    parser = flag.parser
    values = getattr(parser, "enum_values", None)
    if values:
        return "one of " + ", ".join(f"`{v}`" for v in values)
    low, high = getattr(parser, "lower_bound", None), getattr(parser, "upper_bound", None)
    if low is None and high is None:
        return ""
    return f"[{'-inf' if low is None else low}, {'inf' if high is None else high}]"


def flags_reference(flag_list: Optional[Sequence[Any]] = None) -> str:
    """Every flag of train.py: type, default, valid values and its help text."""
    flag_list = train_flags() if flag_list is None else flag_list
    rows = [
        [
            f"`--{flag.name}`",
            flag.flag_type(),
            "" if flag.default in (None, "", []) else f"`{flag.default_as_str.strip(chr(39))}`",
            flag_range(flag),
            " ".join(flag.help.split()),
        ]
        for flag in flag_list
    ]
    return markdown_table(["flag", "type", "default", "valid", "what it does"], rows)


# ---------------------------------------------------------------- benchmark results


def load_results(folder: Path = RESULTS_DIR) -> List[Dict[str, Any]]:
    """Every docs/results/*.json, by name; each keeps its file name as ``"file"``."""
    return scores.read_results(str(folder))


def result_iqm(result: Dict[str, Any]) -> Optional[float]:
    """The IQM of the final returns: the file's own, else computed from ``final_returns``."""
    if result.get("iqm") is not None:
        return float(result["iqm"])
    returns = result.get("final_returns")
    return float(interquartile_mean(returns)) if returns else None


def interval_text(value: float, interval: Optional[Sequence[float]], digits: int = 1) -> str:
    """``value [low, high]``, or the value alone without an interval."""
    if not interval:
        return f"{value:.{digits}f}"
    return f"{value:.{digits}f} [{interval[0]:.{digits}f}, {interval[1]:.{digits}f}]"


def iqm_text(result: Dict[str, Any]) -> str:
    iqm = result_iqm(result)
    return "-" if iqm is None else interval_text(iqm, result.get("ci95"))


def best_text(result: Dict[str, Any]) -> str:
    """The best evaluation's IQM [95% CI], or "not recorded" (files from before the suite
    recorded each seed's best evaluation: nothing to compute it from)."""
    if result.get("best_iqm") is None:
        return "not recorded"
    return interval_text(result["best_iqm"], result.get("best_ci95"))


def result_threshold(result: Dict[str, Any]) -> Optional[float]:
    """The solved threshold: the file's own, else its env's (scripts/bench/scores.py)."""
    if result.get("solved_threshold") is not None:
        return float(result["solved_threshold"])
    return scores.solved_threshold(result["env"]) if result.get("env") else None


def solved_text(result: Dict[str, Any]) -> str:
    """Seeds at or above the solved threshold, of all ("7/10"); "-" for an env without a
    threshold, "not recorded" for a file without per-seed returns."""
    returns, threshold = result.get("final_returns"), result_threshold(result)
    if threshold is None:
        return "-"
    if not returns:
        return "not recorded"
    solved = sum(1 for x in returns if x >= threshold)
    return f"{solved}/{len(returns)}"


def peer_runs_text(result: Dict[str, Any]) -> str:
    """The peer's runs over the same seeds: its IQM [95% CI] and seeds, and the
    probability that rl improves on it; "-" where no peer ran."""
    peer = result.get("peer_runs")
    if not peer or result.get("peer_iqm") is None:
        return "-"
    seeds = len(peer.get("final_returns") or [])
    return (
        f"{peer['name']}: {interval_text(result['peer_iqm'], result.get('peer_ci95'))} "
        f"({seeds} seeds); P(rl > peer) "
        f"{interval_text(result['poi_vs_peer'], result.get('poi_vs_peer_ci95'), 2)}"
    )


def peer_text(result: Dict[str, Any]) -> str:
    peer = result.get("peer")
    if not peer:
        return "-"
    value = peer.get("value")
    steps = peer.get("train_steps")
    text = f"{peer['name']}: " + (f"{value:g}" if isinstance(value, (int, float)) else str(value))
    return text + (f" at {steps:,}" if steps else "")


def machine_text(machine: Optional[Dict[str, float]]) -> str:
    if not machine:
        return "not recorded"
    return (
        f"compiled TF call {machine['tf_call_ms']} ms, NumPy MLP {machine['numpy_mlp_ms']} ms, "
        f"CartPole step {machine['cartpole_step_ms']} ms"
    )


def learning_results(results: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The results that score a set's learning (a final return), by env then set."""
    scored = [r for r in results if result_iqm(r) is not None]
    return sorted(scored, key=lambda r: (r.get("env", ""), r["set"]))


def seed_count(result: Dict[str, Any]) -> int:
    return len(result.get("seeds") or result.get("final_returns") or []) or result.get("copies", 0)


def results_table(results: Optional[Sequence[Dict[str, Any]]] = None) -> str:
    """Final returns of every learning result: IQM [95% CI], solved seeds, the best
    evaluation's IQM beside it, the peer's runs and RL-Zoo's value; each set links to how
    it was made."""
    results = load_results() if results is None else results
    rows = []
    for r in learning_results(results):
        wall = r.get("median_wall_seconds")
        rows.append(
            [
                f"[`{r['set']}`](#{result_anchor(r)})",
                r["env"],
                f"{r['train_steps']:,}",
                str(seed_count(r)),
                iqm_text(r),
                solved_text(r),
                best_text(r),
                peer_runs_text(r),
                peer_text(r),
                "-" if wall is None else f"{wall:,.0f}",
            ]
        )
    return markdown_table(
        [
            "set",
            "env",
            "steps",
            "seeds",
            "final return: IQM [95% CI]",
            "solved",
            "best evaluation: IQM [95% CI]",
            "peer's runs, same seeds",
            "published (steps)",
            "median wall s",
        ],
        rows,
        "lllrlrlllr",
    )


def thresholds_table() -> str:
    """Per classic env: the solved threshold and where it comes from, random play's return
    and the RL-Zoo values the profile normalises by."""
    rows = []
    for env, random_return in scores.RANDOM_RETURNS.items():
        threshold = scores.solved_threshold(env)
        source = (
            "chosen (scripts/bench/scores.py)"
            if env in scores.CHOSEN_THRESHOLDS
            else ("Gymnasium's `reward_threshold`")
        )
        rows.append(
            [env, "-" if threshold is None else f"{threshold:g}", source, f"{random_return:g}"]
        )
    return markdown_table(["env", "solved at", "threshold from", "random play"], rows, "lrlr")


def profile_image() -> str:
    """The performance profile of docs/results, if drawn (scripts/benchmark.py --profile)."""
    if not (RESULTS_DIR / "profile.png").exists():
        return "Not drawn yet: `python scripts/benchmark.py --profile docs/results`.\n"
    return "![performance profile](results/profile.png)\n"


def family(set_name: str) -> str:
    """The row of a set in the results grid: its name's first word (``rainbow_cartpole`` ->
    rainbow), so Rainbow and DQN, one agent, keep their own rows."""
    return set_name.split("_")[0]


def results_grid(results: Optional[Sequence[Dict[str, Any]]] = None, link: str = "") -> str:
    """README's summary: one row per algorithm, one column per env, each cell the IQM of a
    set's final returns over 3 or more seeds (n: how many) with its peer's value in
    brackets, linking to the set's row on the page. Where two
    sets of a family share an env, the one at its peer's budget wins."""
    results = load_results() if results is None else results
    scored = [r for r in learning_results(results) if seed_count(r) >= 3]
    envs = sorted({r["env"] for r in scored})
    cells: Dict[str, Dict[str, Dict[str, Any]]] = {}
    for r in scored:
        row = cells.setdefault(family(r["set"]), {})
        at_peer_budget = (r.get("peer") or {}).get("train_steps") == r["train_steps"]
        if r["env"] not in row or at_peer_budget:
            row[r["env"]] = r
    rows = []
    for name in sorted(cells):
        row = [name]
        for env in envs:
            r = cells[name].get(env)
            if r is None:
                row.append("")
                continue
            peer = (r.get("peer") or {}).get("value")
            value = f"[{result_iqm(r):.0f}]({link}#{result_anchor(r)}) n={seed_count(r)}"
            row.append(value + ("" if peer is None else f" ({peer:g})"))
        rows.append(row)
    return markdown_table(["", *(env.split("-v")[0] for env in envs)], rows, "l" + "r" * len(envs))


def result_anchor(result: Dict[str, Any]) -> str:
    return "result-" + result["file"][: -len(".json")].replace("_", "-")


def speed_results(results: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The results that time rl against a peer (``kind: speed``)."""
    return [r for r in results if r.get("kind") == "speed"]


def speed_table(results: Optional[Sequence[Dict[str, Any]]] = None) -> str:
    """Median wall time of whole train.py runs beside the peer's, per result."""
    results = load_results() if results is None else results
    rows = []
    for r in speed_results(results):
        ours, theirs = r["median_wall_seconds"], r["peer"]["median_wall_seconds"]
        rows.append(
            [
                f"[`{r['set']}`](#{result_anchor(r)})",
                f"{r['train_steps']:,}",
                f"{ours:.1f}",
                f"{theirs:.1f}",
                f"{ours / theirs:.2f}",
                r["peer"]["name"],
                str(r["machine"]["tf_call_ms"]),
            ]
        )
    return markdown_table(
        ["set", "steps", "rl s", "peer s", "rl / peer", "peer", "TF call ms"], rows, "lrrrrlr"
    )


def provenance(results: Optional[Sequence[Dict[str, Any]]] = None) -> str:
    """For every result: the command that reproduces it, the machine's per-call costs, the
    date, each seed's final return and the curves, under an anchor the tables link to."""
    results = load_results() if results is None else results
    parts = []
    for r in sorted(results, key=lambda r: r["file"]):
        lines = [f"#### {r['set']} ({r.get('env', '')}) {{#{result_anchor(r)}}}\n"]
        lines.append(f"- command: `{r['command']}`")
        lines.append(f"- machine: {machine_text(r.get('machine'))}")
        if r.get("date"):
            lines.append(f"- date: {r['date']}")
        if r.get("seeds"):
            lines.append("- seeds, in copy order: " + ", ".join(str(x) for x in r["seeds"]))
        if r.get("final_returns"):
            returns = ", ".join(f"{x:g}" for x in r["final_returns"])
            episodes = r.get("eval_episodes")
            lines.append(
                f"- final returns: {returns}" + (f" ({episodes} episodes each)" if episodes else "")
            )
        if r.get("best_returns"):
            lines.append("- best evaluations: " + ", ".join(f"{x:g}" for x in r["best_returns"]))
        elif r.get("final_returns"):
            lines.append("- best evaluations: not recorded")
        if r.get("final_returns") and result_threshold(r) is not None:
            lines.append(f"- solved at: {result_threshold(r):g} ({solved_text(r)} seeds)")
        if r.get("wall_seconds"):
            lines.append("- wall seconds: " + ", ".join(f"{x:g}" for x in r["wall_seconds"]))
        peer = r.get("peer")
        if peer and peer.get("source"):
            lines.append(f"- peer: {peer['name']}, from {peer['source']}")
        runs = r.get("peer_runs")
        if runs:
            lines.append(f"- peer's runs: {runs['name']}, `{runs['command']}`")
            lines.append(
                "- peer's final returns: " + ", ".join(f"{x:g}" for x in runs["final_returns"])
            )
        if r.get("note"):
            lines.append(f"- note: {r['note']}")
        if r.get("curves"):
            lines.append(f"\n![{r['set']}]({os.path.relpath(r['curves'], 'docs')})")
        parts.append("\n".join(lines) + "\n")
    return "\n".join(parts)


def curves_gallery() -> str:
    """Every curve image under docs/suite/, one per env or variant."""
    images = sorted(glob.glob(str(ROOT / "docs" / "suite" / "curves_*.png")))
    parts = []
    for path in images:
        title = Path(path).stem[len("curves_") :].replace("_", " ")
        parts.append(f"**{title}**\n\n![{title}](suite/{Path(path).name})\n")
    return "\n".join(parts)


def import_layers(path: Path = IMPORT_LAYERS) -> List[Tuple[str, List[str], bool]]:
    """The layers contract of ``path``, top first: (what it is, its modules, independent).

    The comment line(s) above a layer say what it is; the file's own comments above the
    first section are skipped, and only ``;`` would start a comment inside the value, so
    the ``#`` lines stay in it and are read here. Modules joined by ``|`` are independent
    (they may not import each other), ones joined by ``:`` may.
    """
    text = path.read_text(encoding="utf-8")
    parser = configparser.ConfigParser(comment_prefixes=(";",), inline_comment_prefixes=None)
    parser.read_string(text[text.index("[") :])
    layers, note = [], []
    for line in parser[LAYERS_CONTRACT]["layers"].splitlines():
        line = line.strip()
        if line.startswith("#"):
            note.append(line.lstrip("# "))
        elif line:
            independent = ":" not in line
            modules = [m.strip() for m in re.split(r"[|:]", line)]
            layers.append((" ".join(note), modules, independent))
            note = []
    return layers


def layers_list(path: Path = IMPORT_LAYERS) -> str:
    """The import layers as a numbered list, top (imports the most) to bottom."""
    lines = []
    for i, (note, modules, independent) in enumerate(import_layers(path), 1):
        names = ", ".join(f"`{m}`" for m in modules)
        if len(modules) > 1:
            names += " (independent)" if independent else " (may import each other)"
        lines.append(f"{i}. {names}: {note}")
    return "\n".join(lines) + "\n"


# Registries whose names the architecture page lists with where each is defined.
DECLARED_KINDS = ("agents", "models", "act_select", "grad_comp")


def source_path(target: str) -> str:
    """``"rl.agents.dqn:DQNLearner"`` -> ``"rl/agents/dqn.py"``."""
    return target.split(":")[0].replace(".", "/") + ".py"


def origin_text(name: str, target: str) -> str:
    """Where a registered name is defined: its file, and its attribute if not the name."""
    attribute = target.split(":")[1]
    where = f"`{source_path(target)}`"
    return where if attribute == name else f"`{attribute}` in {where}"


def registrations() -> str:
    """What each package registers and where it is defined, from the registries: the
    declared names (agents, models, act_selects, losses) and the modules of hparam sets."""
    lines = []
    for kind in DECLARED_KINDS:
        reg = registry.ALL[kind]
        entries = ", ".join(
            f"`{name}` ({origin_text(name, reg.origin(name))})" for name in reg.names()
        )
        lines.append(f"- **{kind}**: {entries}")
    modules: Dict[str, List[str]] = {}
    for name in registry.hparams.names():
        modules.setdefault(source_path(registry.hparams.origin(name)), []).append(name)
    sets = "; ".join(
        f"`{path}`: {', '.join(f'`{n}`' for n in names)}" for path, names in sorted(modules.items())
    )
    lines.append(f"- **hparams** sets by module: {sets}")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- blocks


def generators(readme: bool = False) -> Dict[str, Callable[[], str]]:
    """Block name -> its text. README's results table links into the site's page."""
    link = README_DOCS + "benchmarks.md" if readme else "benchmarks.md"
    return {
        "algorithms": algorithms_table,
        "sets": sets_table,
        "hparams": hparams_reference,
        "flags": flags_reference,
        "results": results_table,
        "results-grid": lambda: results_grid(link=link),
        "thresholds": thresholds_table,
        "profile": profile_image,
        "speed": speed_table,
        "provenance": provenance,
        "curves": curves_gallery,
        "layers": layers_list,
        "registrations": registrations,
    }


def fill_blocks(text: str, makers: Dict[str, Callable[[], str]]) -> str:
    """``text`` with every generated block's body replaced by its generator's output."""

    def fill(match: re.Match) -> str:
        name = match.group(2)
        if name not in makers:
            raise KeyError(f"unknown generated block {name!r}; known: {', '.join(makers)}")
        return match.group(1) + makers[name]() + match.group(4)

    return BLOCK.sub(fill, text)


def stale_blocks(path: Path = README) -> List[str]:
    """The names of ``path``'s generated blocks whose text differs from a fresh one."""
    text = path.read_text(encoding="utf-8")
    fresh = fill_blocks(text, generators(readme=True))
    old = {m.group(2): m.group(3) for m in BLOCK.finditer(text)}
    new = {m.group(2): m.group(3) for m in BLOCK.finditer(fresh)}
    return [name for name in old if old[name] != new[name]]


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", action="store_true", help="rewrite README.md's generated blocks")
    group.add_argument(
        "--check", action="store_true", help="exit 1 if README.md's blocks are stale"
    )
    group.add_argument("--show", metavar="NAME", help="print one generated block")
    args = parser.parse_args(argv)
    if args.show:
        makers = generators()
        if args.show not in makers:
            print(
                f"docs.py: error: unknown block {args.show!r}; known: {', '.join(makers)}",
                file=sys.stderr,
            )
            return 2
        print(makers[args.show](), end="")
        return 0
    if args.check:
        stale = stale_blocks()
        if stale:
            print(f"README.md: stale generated blocks {', '.join(stale)}: run `{WRITE_COMMAND}`")
            return 1
        return 0
    text = README.read_text(encoding="utf-8")
    README.write_text(fill_blocks(text, generators(readme=True)), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
