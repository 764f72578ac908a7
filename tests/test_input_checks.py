"""The shared checks of user input: numeric flags with declared ranges, one copies check,
one-line error text, bounded JSON nesting, typed env keyword arguments, auth tokens, and
the last inputs and messages that slipped (issue 44): an env's max_episode_steps, an hparam
overridden twice, video without evaluations, malformed IPv6 env URLs, a --plugins path, an
output folder behind a link that leads nowhere, a full disk's words, the closing JSON line
and the fallback to an older checkpoint.

What train.py and the other commands answer with them is tested through the commands
(test_train_cli.py, test_search.py, test_remote_server.py); here are the pieces, on
hand-picked values.
"""

import argparse
import json
import os
import re

import pytest
from absl import flags

from rl import (
    catalog,  # noqa: F401  (fills the registries)
    command_line,
    plugins,
    registry,
    slots,
)
from rl.cli import exits, flag_table
from rl.command_line import InRange, float_in_range, int_in_range
from rl.early_checks import check_run
from rl.envs.make import check_env_name, fits_kind
from rl.envs.remote import address
from rl.errors import HParamsError, PluginError, RunConflictError, one_line
from rl.files import MAX_JSON_DEPTH, JSONNestingError, loads_json
from rl.hparams.base import apply_overrides
from rl.run_folder import check_output_dir, fallback_notice

pytestmark = pytest.mark.unit

NUMERIC_DEFINES = (flags.DEFINE_integer, flag_table.define_finite_float)


def test_every_numeric_flag_of_train_py_declares_both_bounds():
    numeric = [flag for flag in flag_table.FLAG_TABLE if flag.define in NUMERIC_DEFINES]
    assert {"copies", "cpu_replicas", "worker_restart_window", "seed"} <= {
        flag.name for flag in numeric
    }
    for flag in numeric:
        assert {"lower_bound", "upper_bound"} <= set(flag.options), flag.name
        assert flag.options["lower_bound"] <= flag.options["upper_bound"], flag.name
    # absl's own float flag lets nan through its bounds (nan < low is False).
    assert flags.DEFINE_float not in {flag.define for flag in flag_table.FLAG_TABLE}


def test_flags_that_set_hparams_take_the_fields_ranges():
    options = {flag.name: flag.options for flag in flag_table.FLAG_TABLE}
    assert options["seed"] == {"lower_bound": 0, "upper_bound": 2**31 - 1}
    assert options["train_steps"] == {"lower_bound": 1, "upper_bound": 10**12}
    assert options["eval_episodes"] == {"lower_bound": 0, "upper_bound": 100_000}
    assert options["num_workers"] == {"lower_bound": 0, "upper_bound": 4096}  # num_envs' high


@pytest.mark.parametrize("text", ["nan", "NaN", "inf", "-inf", "0.5", "1e6"])
def test_the_finite_float_parser_refuses_nan_inf_and_values_outside(text):
    with pytest.raises(ValueError, match=r"is not a number in the range \[1.0, 100.0\]"):
        flag_table.FiniteFloatParser(1.0, 100.0).parse(text)


def test_the_finite_float_parser_takes_its_bounds_and_between():
    parser = flag_table.FiniteFloatParser(1.0, 100.0)
    assert [parser.parse(t) for t in ("1", "2.5", "100")] == [1.0, 2.5, 100.0]


def commands_parsers():
    """The argparse parsers of every user-facing command but train.py (absl)."""
    import rl.envs.check
    import rl.search.__main__
    import rl.tournament.cli
    import scripts.bench.cli
    from rl.envs.remote import serve

    captured = []

    class Captured(Exception):
        pass

    def capture(parser, args=None, namespace=None):
        captured.append(parser)
        raise Captured

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(command_line.OneLineParser, "parse_args", capture)
        for parse in (
            rl.search.__main__.parse_args,
            rl.tournament.cli.parse_args,
            rl.envs.check.parse_args,
        ):
            with pytest.raises(Captured):
                parse([])
    return captured + [serve.build_parser(), scripts.bench.cli.build_parser()]


def test_every_numeric_flag_of_the_other_commands_reads_through_a_range():
    parsers = commands_parsers()
    assert len(parsers) == 5
    for parser in parsers:
        typed = [action for action in parser._actions if action.type is not None]
        assert typed, parser.prog  # each has numeric flags
        for action in typed:
            assert isinstance(action.type, InRange), (parser.prog, action.dest)
            assert action.type.low <= action.type.high, (parser.prog, action.dest)


@pytest.mark.parametrize(
    "reader, text, expected",
    [
        (int_in_range(1, 3), "2", 2),
        (int_in_range(1, 3), "3", 3),
        (float_in_range(0.5, 2.0), "0.5", 0.5),
        (float_in_range(0.5, 2.0), "2", 2.0),
    ],
)
def test_a_range_reads_values_inside(reader, text, expected):
    value = reader(text)
    assert value == expected and type(value) is type(expected)


@pytest.mark.parametrize(
    "reader, text, message",
    [
        (int_in_range(1, 3), "0", "must be at least 1, got 0"),
        (int_in_range(1, 3), "4", "must be at most 3, got 4"),
        (int_in_range(1, 3), "nan", "'nan' is not an integer"),
        (int_in_range(1, 3), "2.0", "'2.0' is not an integer"),
        (float_in_range(0.5, 2.0), "nan", r"must be a number in [0.5, 2.0], got nan"),
        (float_in_range(0.5, 2.0), "-inf", r"must be a number in [0.5, 2.0], got -inf"),
        (float_in_range(0.5, 2.0), "x", "'x' is not a number"),
        (float_in_range(0.5, 2.0), "2.25", "must be at most 2.0, got 2.25"),
    ],
)
def test_a_range_refuses_values_outside_in_one_line(reader, text, message):
    with pytest.raises(argparse.ArgumentTypeError) as refused:
        reader(text)
    assert str(refused.value) == message


@pytest.mark.parametrize("copies, parallel", [(1, None), (3, None), (2, 2), (5, 1), (5, 3)])
def test_copies_and_copies_parallel_that_agree_pass(copies, parallel):
    slots.check_copies(copies, parallel)


@pytest.mark.parametrize(
    "copies, parallel, message",
    [
        (1, 2, "--copies_parallel is for --copies N with N > 1; add --copies or remove it"),
        (1, 1, "--copies_parallel is for --copies N with N > 1"),
        (2, 3, "--copies_parallel 3 is more than --copies 2: at most 2 copies can run at once"),
    ],
)
def test_copies_parallel_without_copies_or_above_them_is_refused(copies, parallel, message):
    with pytest.raises(HParamsError) as refused:
        slots.check_copies(copies, parallel)
    assert str(refused.value).startswith(message)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("plain text, quotes ' \" and é", "plain text, quotes ' \" and é"),
        ("a\nb", "a\\nb"),
        ("tab\there\r", "tab\\there\\r"),
        ("bell\x07 escape\x1b[31m", "bell\\x07 escape\\x1b[31m"),
        ("line\u2028separator", "line\\u2028separator"),
    ],
)
def test_one_line_escapes_control_characters_only(text, expected):
    assert one_line(text) == expected
    assert len(one_line(text).splitlines()) == 1


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_json_nested_to_the_limit_is_read():
    assert loads_json(nested(MAX_JSON_DEPTH)) is not None
    assert loads_json('{"a": [1, {"b": [2]}]}') == {"a": [1, {"b": [2]}]}
    assert loads_json("3") == 3


@pytest.mark.parametrize(
    "text",
    [nested(MAX_JSON_DEPTH + 1), "[" * 100_000, '{"a": ' + nested(MAX_JSON_DEPTH) + "}"],
)
def test_json_nested_deeper_is_a_value_error_not_a_recursion_error(text):
    with pytest.raises(JSONNestingError, match=f"nested deeper than {MAX_JSON_DEPTH} levels"):
        loads_json(text)


def test_an_env_keyword_argument_nested_too_deeply_is_refused_not_kept_as_text():
    assert address.query_kwargs("a=[[1]]&b=[[1") == {"a": [[1]], "b": "[[1"}  # bad JSON: text
    with pytest.raises(ValueError, match="keyword argument 'a' is JSON nested deeper than"):
        address.query_kwargs("a=" + "[" * 5000)


@pytest.mark.parametrize(
    "value, kind, fits",
    [
        (True, bool, True),
        (False, bool, True),
        ("maybe", bool, False),
        ("true", bool, False),  # JSON true is True; the text "true" in quotes is not
        (1, bool, False),
        (0, bool, False),
        (3, int, True),
        (3.0, int, False),
        (True, int, False),
        (3, float, True),
        (-9.5, float, True),
        ("abc", float, False),
        (False, float, False),
        (float("nan"), float, False),  # json.loads("NaN")
        (float("-inf"), float, False),
    ],
)
def test_env_keyword_values_fit_their_declared_kind(value, kind, fits):
    assert fits_kind(value, kind) is fits


@pytest.mark.parametrize(
    "token, message",
    [
        ("", "--token is blank"),
        ("   ", "--token is blank"),
        ("\t\n", "--token is blank"),
        (" s3cret", "--token holds whitespace at its ends"),
        ("s3cret\n", "--token holds whitespace at its ends"),
        ("a\x00b", "characters other than printable ASCII"),
        ("pässword", "characters other than printable ASCII"),
    ],
)
def test_a_token_that_cannot_protect_or_be_sent_is_refused(token, message):
    with pytest.raises(ValueError, match=message):
        address.check_token(token, "--token")


def test_a_printable_token_is_kept_as_it_is():
    assert address.check_token("a-b_c.d~e/f+g=", "--token") == "a-b_c.d~e/f+g="
    assert address.check_token("with inner space", "--token") == "with inner space"


def test_the_token_variable_unset_or_empty_means_no_token(monkeypatch):
    monkeypatch.delenv(address.TOKEN_VARIABLE, raising=False)
    assert address.token_from_environment() is None
    monkeypatch.setenv(address.TOKEN_VARIABLE, "")
    assert address.token_from_environment() is None
    monkeypatch.setenv(address.TOKEN_VARIABLE, " ")
    with pytest.raises(ValueError, match=r"\$RL_ENV_SERVER_TOKEN is blank"):
        address.token_from_environment()


@pytest.mark.parametrize("steps", ["-1", "0", "true", "1.5", "'9'"])
def test_gymnasiums_max_episode_steps_is_a_positive_integer_naming_the_envs_own(steps):
    # A negative one drops CartPole's 500-step limit; Gymnasium refuses 0 only once made.
    with pytest.raises(
        HParamsError,
        match=r"'max_episode_steps' takes a positive integer \(its own limit is 500; leave it "
        r"out to keep that\), got",
    ):
        check_env_name(f"CartPole-v1?max_episode_steps={steps}")
    check_env_name("CartPole-v1?max_episode_steps=50")  # a shorter limit is the user's choice


def test_an_hparam_is_overridden_once():
    hp = registry.hparams.get("ppo_tiny")()
    with pytest.raises(
        HParamsError, match="hparam 'learning_rate' is overridden twice; give it once"
    ):
        apply_overrides(hp, "learning_rate=1e-3,seed=3,learning_rate=2e-3")
    assert apply_overrides(hp, "learning_rate=1e-3,seed=3").learning_rate == 1e-3


def test_recording_video_needs_evaluation_episodes_to_record(tmp_path):
    out = str(tmp_path / "run")
    for given in ({"eval_episodes": 0}, {"overrides": "eval_episodes=0"}):
        with pytest.raises(HParamsError, match="--record_video records evaluation episodes"):
            check_run("ppo_tiny", out, record_video=True, **given)
        check_run("ppo_tiny", out, **given)  # without video, no evaluation is a choice
    check_run("ppo_tiny", out, record_video=True, eval_episodes=1)


@pytest.mark.parametrize(
    "url, why",
    [
        ("grpc://[::1/CartPole-v1", "Invalid IPv6 URL"),
        (
            "grpc://[zz::1]:50051/CartPole-v1",
            "'zz::1' does not appear to be an IPv4 or IPv6 address",
        ),
    ],
)
def test_a_malformed_ipv6_env_url_says_how_one_is_written(url, why):
    with pytest.raises(ValueError) as caught:
        address.parse(url)
    assert str(caught.value) == (
        f"env URL {url!r} has an invalid host ({why}): an IPv6 address is written in brackets, "
        "e.g. grpc://[::1]:50051/ENV_ID; grpc://host:port/ENV_ID (or grpcs:// for TLS)"
    )
    assert address.parse("grpc://[::1]:50051/CartPole-v1").target == "[::1]:50051"


@pytest.mark.parametrize("name", ["../../etc/passwd", "my_pkg/my_rl", ".relative", "a..b", "x-y"])
def test_a_plugin_is_a_dotted_module_name_not_a_path(name):
    with pytest.raises(PluginError, match=f"--plugins {re.escape(name)}: not a module name; "):
        plugins.load([name])


@pytest.mark.parametrize("target", ["itself", "nowhere"])
def test_an_output_dir_behind_a_link_that_leads_nowhere_says_so(tmp_path, target):
    link = tmp_path / "link"
    link.symlink_to(link if target == "itself" else tmp_path / "missing")
    why = "Too many levels of symbolic links" if target == "itself" else "does not exist"
    for out in (link, link / "run"):
        with pytest.raises(RunConflictError) as caught:
            check_output_dir(str(out))
        message = str(caught.value)
        assert message.startswith(f"--output_dir {out}: {link} is a symbolic link that cannot")
        assert why in message and message.endswith("; name a folder, or a link to one")
    assert os.listdir(tmp_path) == ["link"]


def test_a_refused_write_is_said_in_the_oss_words_without_tensorflows_inside():
    from rl._tf import file_system_words

    full = (
        "{{function_node __wrapped__SaveV2_dtypes_32_device_/job:localhost/replica:0/task:0/"
        "device:CPU:0}} /r/checkpoints/ckpt-320_temp/part-00000-of-00001.data-00000-of-00001."
        "tempstate391; File too large [Op:SaveV2]"
    )
    assert file_system_words(full) == "File too large"
    assert file_system_words("/r/x; No space left on device\nmore") == "No space left on device"
    # Words the OS did not give are kept, without TensorFlow's wrapping.
    assert file_system_words("{{function_node f}} Failed to rename: a [Op:MergeV2]") == (
        "Failed to rename: a"
    )


def test_the_closing_json_line_writes_a_non_finite_number_as_null():
    line = exits.result_json({"step": 64, "loss": float("nan"), "grad_norm": float("inf"),
                            "entropy": 0.5, "failure": "non-finite loss", "arrays": [1]})  # fmt: skip
    assert json.loads(line) == {
        "step": 64, "loss": None, "grad_norm": None, "entropy": 0.5, "failure": "non-finite loss"
    }  # fmt: skip
    assert "NaN" not in line and "Infinity" not in line  # strict JSON


def test_a_fallback_to_an_older_checkpoint_is_one_line_of_what_why_and_where():
    used = "/r/checkpoints/ckpt-128"
    one = {"/r/checkpoints/ckpt-192": "file is too short"}
    assert fallback_notice(one, used) == (
        f"checkpoint ckpt-192 cannot be read (file is too short); using the previous checkpoint "
        f"{used}"
    )
    two = {"/r/checkpoints/ckpt-256": "Read less bytes", **one}
    assert fallback_notice(
        two, used, "/r/checkpoints/unreadable", ["/r/policies/ckpt-192", "/r/policies/ckpt-256"]
    ) == (
        "checkpoints ckpt-256, ckpt-192 cannot be read (ckpt-256: Read less bytes; ckpt-192: "
        f"file is too short); resuming from the previous checkpoint {used}, redoing the training "
        "since step 128: moved ckpt-256 and ckpt-192 to /r/checkpoints/unreadable, the policies "
        "ckpt-192 and ckpt-256 to /r/policies/superseded"
    )
    assert fallback_notice(
        one, used, "/r/checkpoints/unreadable", ["/r/policies/ckpt-192"], ["/r/best/ckpt-160"]
    ).endswith(
        "the policy ckpt-192 to /r/policies/superseded, the best checkpoint ckpt-160 to "
        "/r/best/superseded"
    )
