"""Property tests: whatever text or name comes in, only our own errors come out.

The override parser and the registries are fed arbitrary text by hypothesis;
the only exceptions allowed are HParamsError and UnknownNameError (which
train.py turns into one line and exit code 2), never a TypeError,
MemoryError, RecursionError or the like.
"""

import dataclasses
import math

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from rl import catalog, registry  # noqa: F401  (fills the registries)
from rl.hparams.base import HParamsError, apply_overrides, format_value
from rl.hparams.resolve import resolve_hparams
from rl.registry import UnknownNameError

pytestmark = pytest.mark.unit

SETS = registry.hparams.names()
FIELDS = sorted({f.name for name in SETS for f in dataclasses.fields(registry.hparams.get(name)())})
# Characters that matter to the parser, so hypothesis hits its branches often.
TRICKY = st.text(alphabet="0123456789.eE+-_ [](){}'\",=:naifNITrueFlsx\n", max_size=40)
VALUES = st.one_of(TRICKY, st.text(max_size=40))
PAIRS = st.lists(
    st.tuples(st.one_of(st.sampled_from(FIELDS), st.text(max_size=12)), VALUES).map(
        lambda pair: f"{pair[0]}={pair[1]}"
    ),
    min_size=1,
    max_size=4,
).map(",".join)
FAST = settings(max_examples=300, deadline=None)


def resolve_or_our_error(set_name: str, text: str) -> None:
    try:
        resolve_hparams(set_name, text)
    except (HParamsError, UnknownNameError) as e:
        assert str(e).strip() and "\n" not in str(e), repr(str(e))


@FAST
@given(set_name=st.sampled_from(SETS), text=st.one_of(PAIRS, st.text(max_size=200)))
@example(set_name="ppo_tiny", text="hidden_sizes={[]:1}")
@example(set_name="ppo_tiny", text="act_select={[]}")
@example(set_name="ppo_tiny", text="train_steps=" + "-" * 20_000 + "1")
@example(set_name="ppo_tiny", text="train_steps=" + "+".join(["1"] * 3000))
@example(set_name="ppo_tiny", text="train_steps=" + "(" * 1000 + "1" + ")" * 1000)
@example(set_name="ppo_tiny", text="learning_rate=1e999")
@example(set_name="ppo_tiny", text="hidden_sizes=[0]")
@example(set_name="ppo_tiny", text="seed=9" * 5000)
@example(set_name="dqn_tiny", text="buffer_size=1e12")
@example(set_name="ppo_tiny", text="agent=dqn")
@example(set_name="ppo_tiny", text="env=\x00")
@example(set_name="ppo_tiny", text="env='a\nb'")
@example(set_name="ppo_tiny", text="a\nb=1")
def test_any_override_text_gives_a_value_or_our_error(set_name, text):
    resolve_or_our_error(set_name, text)


@FAST
@given(kind=st.sampled_from(sorted(registry.ALL)), name=st.text(max_size=60))
@example(kind="hparams", name="ppo_cartpol")
@example(kind="envs", name="\n")
def test_any_name_gives_a_registered_object_or_unknown_name_error(kind, name):
    reg = registry.ALL[kind]
    try:
        reg.get(name)
        assert name in reg
    except UnknownNameError:
        assert name not in reg


@FAST
@given(n=st.integers(min_value=-(10**20), max_value=10**20))
@example(n=0)
@example(n=1)
@example(n=4096)
@example(n=4097)
def test_num_envs_is_accepted_exactly_in_1_to_4096(n):
    try:
        hp = resolve_hparams("ppo_tiny", f"num_envs={n}")
        assert 1 <= n <= 4096 and hp.num_envs == n
    except HParamsError as e:
        assert not 1 <= n <= 4096
        assert str(e) == f"hparam 'num_envs' must be in [1, 4096], got {n}"


@FAST
@given(g=st.floats(allow_nan=True, allow_infinity=True))
@example(g=-0.0)
@example(g=1.0)
@example(g=5e-324)
def test_gamma_is_accepted_exactly_when_finite_and_in_0_to_1(g):
    try:
        hp = resolve_hparams("ppo_tiny", f"gamma={g!r}")
        assert 0 <= g <= 1 and hp.gamma == g
    except HParamsError:
        assert not (math.isfinite(g) and 0 <= g <= 1)


@pytest.mark.parametrize("set_name", SETS)
def test_every_value_written_in_override_syntax_reads_back_the_same(set_name):
    # The examples in error messages use format_value, so they are valid input.
    hp = registry.hparams.get(set_name)()
    for field in dataclasses.fields(hp):
        value = getattr(hp, field.name)
        assert apply_overrides(hp, f"{field.name}={format_value(value)}") == hp, field.name
