"""Resolve and check once: the early checks' CheckedRun, which the Run takes as it is, and
the launcher of a run's actors, started early and handed to the Run."""

import json

import pytest

from rl import early_checks, experiment
from rl.early_checks import check_run
from rl.errors import CheckpointError, HParamsError, RunConflictError
from rl.hparams.base import HParams
from rl.systems import LocalSystem

pytestmark = pytest.mark.unit


def test_a_new_run_is_resolved_with_its_overrides_and_has_no_verdict_to_resume(tmp_path):
    checked = check_run("ppo_tiny", str(tmp_path / "run"), "seed=7", train_steps=512)
    assert isinstance(checked.hp, HParams)
    assert (checked.hp.seed, checked.hp.train_steps) == (7, 512)
    assert checked.existing is None and checked.eval_records == ()
    assert not (tmp_path / "run").exists()  # nothing written


def test_a_saved_run_is_the_verdict_and_a_different_one_is_refused(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    hp = check_run("ppo_tiny", None, seed=3).hp
    (run / "hparams.json").write_text(json.dumps(hp.to_dict()))
    (run / "eval.jsonl").write_text('{"step": 8, "return_mean": 1.5}\n')
    resumed = check_run(None, str(run))  # no set named: the saved run's
    assert resumed.hp == hp and resumed.existing == hp
    assert resumed.eval_records == ({"step": 8, "return_mean": 1.5},)
    with pytest.raises(RunConflictError):
        check_run("ppo_tiny", str(run), seed=4)


def test_a_new_run_needs_a_set_and_loading_needs_a_run(tmp_path):
    with pytest.raises(HParamsError, match="--hparams is required for a new run"):
        check_run(None, str(tmp_path))
    with pytest.raises(CheckpointError, match="holds no run to load"):
        check_run("ppo_tiny", str(tmp_path), read_only=True)
    with pytest.raises(HParamsError, match="must divide num_envs"):
        check_run("ppo_tiny", str(tmp_path), num_workers=3, overrides="num_envs=4")


def test_the_experiment_takes_the_checked_run_and_the_system_without_checking_again(
    tmp_path, monkeypatch
):
    checked = check_run("ppo_tiny", str(tmp_path / "run"), seed=5)
    system = LocalSystem()

    def checked_again(*args, **kwargs):
        raise AssertionError("the run was checked twice")

    monkeypatch.setattr(experiment, "check_run", checked_again)
    monkeypatch.setattr(early_checks, "check_run", checked_again)
    with experiment.Run(checked, system, verbose=False) as exp:
        assert exp.hp == checked.hp and exp.hp.seed == 5
        assert exp.system is system
        assert exp.output_dir == str(tmp_path / "run")


def test_the_run_spawns_its_workers_from_the_launcher_it_is_handed_and_closes_it(tmp_path):
    # train.py starts the actors before TensorFlow loads (System.actor_launcher) and hands
    # the run their launcher: the one route by which a run's actors start.
    class Launcher:
        log_dir, closed = "unset", False

        def close(self):
            self.closed = True

    checked = check_run("ppo_tiny", str(tmp_path / "run"), num_workers=2)
    launcher = Launcher()
    with experiment.Run(checked, LocalSystem(), launcher=launcher, verbose=False) as run:
        assert run.experience.launcher is launcher and run.experience.num_workers == 2
        assert launcher.log_dir == run.folder.file("workers")
    assert launcher.closed


@pytest.fixture
def train_flags():
    """train.py's flags in this process, parsed from the given argv, unparsed after."""
    from absl import flags

    from rl.cli import flag_table

    if "sys" not in flags.FLAGS:
        flag_table.define_flags()
    yield lambda *argv: flags.FLAGS(["train.py", *argv])
    flags.FLAGS.unparse_flags()


def test_copies_pass_on_the_tables_flags_but_not_their_own(train_flags, monkeypatch):
    from rl.cli import copies

    train_flags(
        "--hparams=ppo_tiny", "--sys=ray", "--ray_address=auto", "--copies=2",
        "--copies_parallel=2", "--plugins=my.a", "--plugins=my.b", "--render",
        "--num_workers=2", "--output_dir=runs/x", "--seed=3",
    )  # fmt: skip
    ran = []
    monkeypatch.setattr(
        copies.slots, "run_in_slots", lambda commands, slots, environ: ran.extend(commands)
    )
    copies.run_copies_in_processes(["runs/x/run_0", "runs/x/run_1"], [11, 12])
    first = ran[0][2:]  # after python and train.py
    assert first[-2:] == ["--output_dir=runs/x/run_0", "--seed=11"]
    given = {arg.split("=")[0] for arg in first[:-2]}
    assert {"--hparams", "--sys", "--ray_address", "--num_workers", "--plugins"} <= given
    assert [arg for arg in first if arg.startswith("--plugins")] == [
        "--plugins=my.a",
        "--plugins=my.b",
    ]
    # Each copy's own, or this process's: never passed.
    assert not given & {"--copies", "--copies_parallel", "--render", "--training", "--list"}
    assert "--tpu" not in given  # None: left to the copy's default


def test_a_flag_of_the_other_mode_is_refused_as_the_table_says(train_flags, capsys):
    from rl.cli import checks

    train_flags("--training=false", "--num_workers=2", "--output_dir=runs/x")
    with pytest.raises(SystemExit) as exit:
        checks.check_mode_flags()
    assert exit.value.code == 2
    assert "--num_workers cannot be used with --training=false" in capsys.readouterr().err
