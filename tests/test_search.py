"""python -m rl.search: space checks, finding the better learning rate, resume, kills, pruning.

The searches train ppo_cartpole for a few thousand steps: with a learning rate of 3e-3 its
evaluations reach 150-450 by then, with 1e-9 (no learning) they stay near 75. The sampler
is seeded (--seed 0): TPE's random start-up then samples 3e-3 first and 1e-9 second, so
the order of trials is fixed.
"""

import csv
import json
import os
import shutil
import signal
import subprocess
import sys

import pytest
import yaml
from eval_logs import write_run
from polling import pids_naming, wait_for

from rl import catalog  # noqa: F401  (fills the registries)
from rl.hparams.resolve import resolve_hparams
from rl.search import report, study, trials
from rl.search.space import NAMED_SPACES, SpaceError, check_space, overrides_text, read_space

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LR_SPACE = "learning_rate: {categorical: [1e-9, 3e-3]}\n"
GOOD_LR, USELESS_LR = 3e-3, 1e-9
EVALS = "eval_interval=2000,checkpoint_interval=2000,eval_episodes=5"
# Steps of a search whose trials are stopped at their first evaluation (step 2000, ~3 s of
# ppo_cartpole): 10000 steps more leave the search many seconds to stop them, even on a
# machine under load (at 8000, one CPU-s less a trial, the margin shrank to a few seconds).
LONG_TRIAL = 12000


def needs_optuna():
    return pytest.importorskip("optuna", reason="needs the search extra (optuna)")


def space(text, hparams="ppo_cartpole", fixed=()):
    return check_space(yaml.safe_load(text), resolve_hparams(hparams), "test.yaml", fixed)


# --- spaces ------------------------------------------------------------------------------
@pytest.mark.unit
@pytest.mark.parametrize(
    "name, hparams", [("ppo_basic", "ppo_cartpole"), ("dqn_basic", "dqn_cartpole")]
)
def test_named_spaces_fit_their_sets(name, hparams):
    label, raw = read_space(name)
    dims = check_space(raw, resolve_hparams(hparams), label)
    assert [d.name for d in dims] == list(NAMED_SPACES[name])


@pytest.mark.unit
def test_yaml_numbers_and_list_text_are_read_as_the_fields_types():
    # YAML reads 1e-5 as a string; the override parser reads it as the field's float.
    (lr, sizes, clip) = space(
        "learning_rate: {log_uniform: [1e-5, 1e-2]}\n"
        "hidden_sizes: {categorical: [[64, 64], '[32]']}\n"
        "max_grad_norm: {categorical: [null, 0.5]}\n"
    )
    assert lr.values == (1e-5, 1e-2) and all(isinstance(v, float) for v in lr.values)
    assert sizes.values == ((64, 64), (32,))
    assert sizes.choices() == ["[64,64]", "[32]"]
    assert clip.values == (None, 0.5)


@pytest.mark.unit
@pytest.mark.parametrize(
    "text, expected",
    [
        (
            "learnin_rate: {log_uniform: [1e-5, 1e-2]}",
            ["unknown hparam 'learnin_rate'", "did you mean 'learning_rate'"],
        ),
        (
            "gamma: {uniform: [0.5, 1.5]}",
            ["gamma: uniform [0.5, 1.5] reaches outside", "must be in [0, 1], got 1.5"],
        ),
        (
            "learning_rate: {uniform: [0, 1e-2]}",
            ["outside the field's limits", "must be > 0, got 0.0"],
        ),
        ("learning_rate: {log_uniform: [0, 1e-2]}", ["a log scale needs low > 0"]),
        ("num_epochs: {int: [0, 4]}", ["must be in [1, 10_000], got 0"]),
        ("num_epochs: {int: [5, 2]}", ["low must be below high"]),
        (
            "activation: {categorical: [tanh, 3]}",
            ["categorical value 3 is of the wrong type", "expects str"],
        ),
        (
            "learning_rate: {categorical: [relu, 1e-3]}",
            ["'relu' is of the wrong type", "expects float"],
        ),
        (
            "activation: {categorical: [tanh, relux]}",
            ["'relux' is outside the field's limits", "must be one of"],
        ),
        (
            "normalize_advantages: {categorical: [true, 1]}",
            ["categorical value 1 is of the wrong type"],
        ),
        (
            "num_epochs: {uniform: [2, 10]}",
            ["uniform does not suit a field of type int; use int or log_int"],
        ),
        ("activation: {uniform: [0, 1]}", ["use categorical"]),
        (
            "clip_ratio: {logarithmic: [0.1, 0.3]}",
            ["unknown distribution 'logarithmic'", "did you mean"],
        ),
        ("clip_ratio: [0.1, 0.3]", ["expected one distribution"]),
        ("clip_ratio: {uniform: 0.2}", ["uniform takes a list"]),
        ("activation: {categorical: [tanh]}", ["at least two choices"]),
        ("hidden_sizes: {categorical: [[64, 64], '[64,64]']}", ["given twice"]),
        ("[learning_rate]", ["must map hparam names to distributions"]),
    ],
)
def test_a_bad_space_is_one_line_naming_the_field_and_the_problem(text, expected):
    with pytest.raises(SpaceError) as error:
        space(text)
    message = str(error.value)
    assert "\n" not in message and message.startswith("search space test.yaml")
    for part in expected:
        assert part in message


@pytest.mark.unit
def test_a_field_fixed_by_the_override_cannot_also_be_searched():
    with pytest.raises(SpaceError, match="'learning_rate' is also set by --hparam_override"):
        space("learning_rate: {log_uniform: [1e-5, 1e-2]}", fixed=["learning_rate"])


@pytest.mark.unit
def test_an_unknown_named_space_lists_the_named_ones(tmp_path):
    with pytest.raises(
        SpaceError, match="did you mean 'ppo_basic'.*named spaces: dqn_basic, ppo_basic"
    ):
        read_space("ppo_basik")
    with pytest.raises(SpaceError, match="does not exist"):
        read_space(str(tmp_path / "space.yaml"))
    (tmp_path / "broken.yaml").write_text("learning_rate: {log_uniform: [1e-5\n")
    with pytest.raises(SpaceError, match="cannot read search space .*broken.yaml"):
        read_space(str(tmp_path / "broken.yaml"))


@pytest.mark.process
def test_help_names_every_named_space():
    proc = subprocess.run(
        [sys.executable, "-m", "rl.search", "--help"], capture_output=True, text=True, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr
    assert "named space (dqn_basic, ppo_basic)" in " ".join(proc.stdout.split())


@pytest.mark.unit
def test_a_json_space_file_is_read_like_a_yaml_one(tmp_path):
    path = tmp_path / "space.json"
    path.write_text(json.dumps({"num_epochs": {"int": [2, 10]}}))
    label, raw = read_space(str(path))
    (dim,) = check_space(raw, resolve_hparams("ppo_cartpole"), label)
    assert (dim.kind, dim.values) == ("int", (2, 10))


@pytest.mark.unit
def test_sampled_values_become_an_override_train_py_reads_back():
    optuna = needs_optuna()
    dims = space(
        "hidden_sizes: {categorical: [[64, 64], [32]]}\n"
        "learning_rate: {log_uniform: [1e-5, 1e-2]}\n"
        "activation: {categorical: [tanh, relu]}\n"
    )
    trial = optuna.trial.FixedTrial(
        {"hidden_sizes": "[32]", "learning_rate": 1.5e-05, "activation": "relu"}
    )
    params = {d.name: d.suggest(trial) for d in dims}
    text = overrides_text(params, "num_epochs=3")
    assert text == "num_epochs=3,hidden_sizes=[32],learning_rate=1.5e-05,activation=relu"
    hp = resolve_hparams("ppo_cartpole", text)
    assert (hp.hidden_sizes, hp.learning_rate, hp.activation, hp.num_epochs) == (
        (32,),
        1.5e-05,
        "relu",
        3,
    )


# --- the study's bookkeeping, without training -------------------------------------------
def config_for(tmp_path, **changes):
    values = dict(
        hparams="ppo_tiny",
        base=resolve_hparams("ppo_tiny"),
        space=space(LR_SPACE, "ppo_tiny"),
        output_dir=str(tmp_path / "search"),
        trials=2,
    )
    return study.SearchConfig(**{**values, **changes})


@pytest.mark.unit
def test_a_trial_left_running_is_marked_failed_and_its_params_queued_again(tmp_path):
    optuna = needs_optuna()
    config = config_for(tmp_path)
    os.makedirs(config.output_dir)
    the_study = study.open_study(config)
    trial = the_study.ask()  # as a killed search leaves it: RUNNING
    trial.suggest_categorical("learning_rate", [1e-9, 3e-3])
    lines = []
    study.fail_stale_trials(the_study, config, lines.append)
    first, queued = the_study.get_trials(deepcopy=False)
    assert first.state == optuna.trial.TrialState.FAIL and not study.counts_as_done(first)
    assert queued.state == optuna.trial.TrialState.WAITING
    assert queued.user_attrs == {study.RETRY_OF: 0}
    retry = the_study.ask()
    assert (
        retry.number == 1
        and retry.suggest_categorical("learning_rate", [1e-9, 3e-3])
        == trial.params["learning_rate"]
    )
    assert lines == [
        "trial 0 was running when the search was stopped: marked failed, its params are "
        "queued again"
    ]


@pytest.mark.unit
def test_a_resumed_search_does_not_sample_its_first_trials_params_again(tmp_path):
    needs_optuna()
    config = config_for(tmp_path, space=space("learning_rate: {log_uniform: [1e-5, 1e-2]}"))
    os.makedirs(config.output_dir)

    def sample(the_study):
        trial = the_study.ask()
        value = trial.suggest_float("learning_rate", 1e-5, 1e-2, log=True)
        the_study.tell(trial, 1.0)
        return value

    first = [sample(study.open_study(config)) for _ in range(2)]  # two stops and resumes
    assert first[0] != first[1]  # the same seed again drew the same value
    assert sample(study.open_study(config)) not in first


@pytest.mark.unit
def test_plots_are_skipped_with_a_reason_until_two_complete_trials_differ(tmp_path):
    optuna = needs_optuna()
    config = config_for(tmp_path)
    os.makedirs(config.output_dir)
    the_study = study.open_study(config)
    distribution = optuna.distributions.CategoricalDistribution([1e-9, 3e-3])

    def add(value, lr):
        the_study.add_trial(
            optuna.trial.create_trial(
                value=value,
                params={"learning_rate": lr},
                distributions={"learning_rate": distribution},
            )
        )

    add(20.0, 1e-9)
    skipped = report.write_plots(the_study, config.output_dir)
    assert skipped == [
        "importances.png not drawn: they need at least 2 complete trials, the study has 1"
    ]
    add(25.0, 1e-9)
    assert report.importance_problem(the_study) == "the complete trials' params do not vary"
    add(300.0, 3e-3)
    assert report.write_plots(the_study, config.output_dir) == []
    for name in ("history.png", "importances.png"):
        assert os.path.getsize(os.path.join(config.output_dir, name)) > 1000


@pytest.mark.process
def test_a_trial_whose_eval_log_is_damaged_fails_and_the_search_goes_on(tmp_path):
    # train.py appends whole lines only, so a bad complete line is damage from outside (a
    # full disk, an editor). It used to raise out of the search, ending every trial.
    optuna = needs_optuna()
    config = config_for(tmp_path)
    os.makedirs(config.output_dir)
    the_study = study.open_study(config)
    lines, processes = [], []

    def launch(command, run_dir, log_path, workdir, copies):
        del command, copies  # a stand-in for train.py that runs until it is killed
        os.makedirs(run_dir)
        with open(os.path.join(run_dir, trials.EVAL_FILE), "w") as f:
            f.write('{"step": 1000, "return_mean": 5.0}\n{"step": 2000, "return_m\n')
        process = trials.TrialProcess(
            [sys.executable, "-c", "import time; time.sleep(600)"], run_dir, log_path, workdir
        )
        processes.append(process.process)
        return process

    search = study.Search(config, the_study, lines.append)
    search.launch = launch
    assert search.run() is None
    assert [p.poll() for p in processes] == [-signal.SIGKILL] * 2  # both ran, both killed
    states = [t.state for t in the_study.get_trials(deepcopy=False)]
    assert states == [optuna.trial.TrialState.FAIL] * 2
    failed = [line for line in lines if " failed: " in line]
    assert len(failed) == 2 and all(
        "its evaluations cannot be read: " in line and "eval.jsonl line 2" in line
        for line in failed
    ), lines


@pytest.mark.unit
def test_a_trial_of_copies_is_scored_at_the_steps_every_copy_has_reached(tmp_path):
    write_run(tmp_path / "run_0", [1000, 2000, 3000], [0.0, 50.0, 90.0])
    write_run(tmp_path / "run_1", [1000, 2000], [10.0, 70.0])
    write_run(tmp_path / "run_2", [1000, 2000], [100.0, 60.0])
    # Three copies: rliable's IQM of fewer than four values is their mean (rl/analysis.py).
    # At 1000: (0 + 10 + 100) / 3 = 36.67; at 2000: (50 + 70 + 60) / 3 = 60.
    # At 3000 only run_0 has evaluated: the step is not in yet.
    scored = trials.read_evaluations(str(tmp_path), -1, copies=3)
    assert [step for step, _ in scored] == [1000, 2000]
    assert scored[0][1] == pytest.approx(110 / 3) and scored[1][1] == pytest.approx(60.0)
    assert trials.read_evaluations(str(tmp_path), 1000, copies=3) == [scored[1]]
    # A copy that has not started has evaluated nowhere.
    assert trials.read_evaluations(str(tmp_path), -1, copies=4) == []
    assert trials.read_evaluations(str(tmp_path / "run_0"), 1000) == [(2000, 50.0), (3000, 90.0)]


@pytest.mark.unit
def test_a_trial_of_copies_asks_train_py_for_them():
    command = trials.train_command("ppo_cartpole", "out", "", copies=3, copies_parallel=2)
    assert command[-2:] == ["--copies=3", "--copies_parallel=2"]
    assert not any("copies" in part for part in trials.train_command("ppo_cartpole", "out", ""))


@pytest.mark.process
def test_a_trial_whose_final_evaluation_is_nan_fails_with_the_reason(tmp_path):
    # Optuna turns a NaN value into a FAIL with no reason: neither done nor retried.
    optuna = needs_optuna()
    config = config_for(tmp_path, trials=1)
    os.makedirs(config.output_dir)
    the_study = study.open_study(config)

    def launch(command, run_dir, log_path, workdir, copies):
        del command, copies  # a stand-in for a train.py whose policy became NaN
        write_run(run_dir, [config.base.train_steps], [float("nan")])
        return trials.TrialProcess([sys.executable, "-c", "pass"], run_dir, log_path, workdir)

    lines = []
    search = study.Search(config, the_study, lines.append)
    search.launch = launch
    assert search.run() is None
    (trial,) = the_study.get_trials(deepcopy=False)
    assert trial.state == optuna.trial.TrialState.FAIL and study.counts_as_done(trial)
    assert trial.user_attrs[study.FAILURE] == "its final evaluation is nan"
    assert lines[-1] == "trial 0 failed: its final evaluation is nan"


@pytest.mark.unit
def test_the_pruners_are_built_from_the_flags(tmp_path):
    optuna = needs_optuna()
    median = study.make_pruner(config_for(tmp_path, pruner_startup_trials=1))
    assert isinstance(median, optuna.pruners.MedianPruner)
    asha = study.make_pruner(config_for(tmp_path, pruner="asha", pruner_warmup_steps=500))
    assert isinstance(asha, optuna.pruners.SuccessiveHalvingPruner)
    assert isinstance(
        study.make_pruner(config_for(tmp_path, pruner="none")), optuna.pruners.NopPruner
    )


# --- whole searches ----------------------------------------------------------------------
def search_command(output_dir, space_file, trials, *extra, train_steps=4000):
    return [
        sys.executable,
        "-m",
        "rl.search",
        "--hparams=ppo_cartpole",
        f"--space={space_file}",
        f"--output_dir={output_dir}",
        f"--trials={trials}",
        f"--train_steps={train_steps}",
        "--seed=0",
        f"--hparam_override={EVALS}",
        *extra,
    ]


def run_search(*args, **kwargs):
    proc = subprocess.run(
        search_command(*args, **kwargs), cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    return proc


def read_trials(output_dir):
    with open(os.path.join(output_dir, "trials.csv"), newline="") as f:
        return list(csv.DictReader(f))


def trial_folders(output_dir):
    return sorted(n for n in os.listdir(output_dir) if n.startswith("trial_"))


@pytest.fixture(scope="module")
def lr_space(tmp_path_factory):
    path = tmp_path_factory.mktemp("space") / "lr.yaml"
    path.write_text(LR_SPACE)
    return str(path)


@pytest.fixture(scope="module")
def two_trials(tmp_path_factory, lr_space):
    """A finished search of two trials, side by side, without pruning."""
    needs_optuna()
    output_dir = str(tmp_path_factory.mktemp("search") / "two")
    proc = run_search(output_dir, lr_space, 2, "--parallel=2", "--pruner=none")
    assert proc.returncode == 0, proc.stderr
    return output_dir, proc


@pytest.mark.process
def test_bad_input_exits_2_with_one_line_and_writes_nothing(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "learning_rate: {log_uniform: [1e-5, 2.0]}\nactivation: {categorical: [tanh, 3]}\n"
    )
    output_dir = tmp_path / "search"
    proc = run_search(str(output_dir), str(bad), 3)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1
    assert proc.stderr.startswith("python -m rl.search: error: search space ")
    assert "activation: categorical value 3 is of the wrong type" in proc.stderr
    assert not output_dir.exists()


@pytest.mark.process
@pytest.mark.parametrize(
    "flags, expected",
    [
        # The same check and words as train.py's (rl.slots.check_copies).
        (["--copies_parallel=2"], "--copies_parallel is for --copies N with N > 1; add --copies"),
        (
            ["--copies=2", "--copies_parallel=3"],
            "--copies_parallel 3 is more than --copies 2: at most 2 copies can run at once",
        ),
        (["--copies=0"], "--copies: must be at least 1, got 0"),
        (["--copies=100000000"], "--copies: must be at most 1000, got 100000000"),
        (["--seed=nan"], "--seed: 'nan' is not an integer"),
        (["--parallel=100000"], "--parallel: must be at most 10000, got 100000"),
    ],
)
def test_bad_copies_flags_exit_2_with_one_line_and_write_nothing(
    tmp_path, lr_space, flags, expected
):
    output_dir = tmp_path / "search"
    proc = run_search(str(output_dir), lr_space, 1, *flags)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert expected in proc.stderr
    assert not output_dir.exists()


@pytest.mark.unit
def test_a_storage_url_that_cannot_be_opened_says_what_storage_takes(tmp_path):
    needs_optuna()
    config = config_for(tmp_path, storage="foo://bar")
    with pytest.raises(study.SystemUnavailableError) as raised:
        study.load_existing_study(config)
    message = str(raised.value)
    assert message.startswith("cannot open the study storage foo://bar: ")
    assert "e.g. sqlite:///" in message and "\n" not in message
    assert not (tmp_path / "search").exists()


@pytest.mark.process
@pytest.mark.parametrize(
    "place, expected",
    [
        ("a_file", "is a file, not a folder; name a folder"),
        ("a_file/search", "is a file, not a folder; name a folder"),
        ("a_run", "holds files (eval.jsonl, hparams.json) but no study 'rl_search'"),
    ],
)
def test_an_output_folder_that_is_a_file_or_another_runs_is_refused_untouched(
    tmp_path, lr_space, place, expected
):
    needs_optuna()
    (tmp_path / "a_file").write_text("mine\n")
    (tmp_path / "a_run").mkdir()
    for name in ("hparams.json", "eval.jsonl"):  # a train.py run folder
        (tmp_path / "a_run" / name).write_text("{}\n")
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    proc = run_search(str(tmp_path / place), lr_space, 1)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert expected in proc.stderr
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before


@pytest.mark.process
def test_a_search_finds_the_learning_rate_that_learns(two_trials):
    output_dir, proc = two_trials
    rows = read_trials(output_dir)
    assert [(r["number"], r["state"]) for r in rows] == [("0", "COMPLETE"), ("1", "COMPLETE")]
    values = {float(r["params"].split("=")[1]): float(r["value"]) for r in rows}
    assert set(values) == {GOOD_LR, USELESS_LR}  # the seeded sampler tried both
    assert values[GOOD_LR] > 150 > 100 > values[USELESS_LR]
    with open(os.path.join(output_dir, "best.json")) as f:
        best = json.load(f)
    assert best["params"] == {"learning_rate": GOOD_LR}
    assert best["hparam_override"] == f"{EVALS},learning_rate={GOOD_LR}"
    assert f"--hparam_override {best['hparam_override']}\n" in proc.stdout
    assert best["value"] == values[GOOD_LR] and best["run_folder"] == rows[0]["run_folder"]
    # Each trial is a normal run folder, trained to the end.
    for row in rows:
        run_dir = os.path.join(output_dir, row["run_folder"])
        for name in ("hparams.json", "eval.jsonl", "checkpoints", "tb", "snapshot"):
            assert os.path.exists(os.path.join(run_dir, name)), name
        assert row["last_step"] == "4000"
    for name in ("history.png", "importances.png"):
        assert os.path.getsize(os.path.join(output_dir, name)) > 1000


@pytest.mark.process
def test_rerunning_with_more_trials_runs_only_the_new_ones(two_trials, tmp_path, lr_space):
    output_dir = str(tmp_path / "moved")
    shutil.copytree(two_trials[0], output_dir)  # a search folder may be moved
    before = read_trials(output_dir)
    with open(os.path.join(output_dir, "trial_0", "eval.jsonl"), "rb") as f:
        evals = f.read()

    proc = run_search(output_dir, lr_space, 3, "--parallel=2", "--pruner=none")

    assert proc.returncode == 0, proc.stderr
    assert "trial 2 started" in proc.stderr
    assert "trial 0 started" not in proc.stderr and "trial 1 started" not in proc.stderr
    rows = read_trials(output_dir)
    assert rows[:2] == before
    assert [(r["number"], r["state"]) for r in rows[2:]] == [("2", "COMPLETE")]
    assert trial_folders(output_dir) == ["trial_0", "trial_1", "trial_2"]
    with open(os.path.join(output_dir, "trial_0", "eval.jsonl"), "rb") as f:
        assert f.read() == evals
    # Done: the same command again starts nothing.
    proc = run_search(output_dir, lr_space, 3, "--parallel=2", "--pruner=none")
    assert proc.returncode == 0 and "started" not in proc.stderr
    # Other settings are refused, before anything is written.
    proc = run_search(output_dir, lr_space, 3, "--pruner=none", train_steps=5000)
    assert proc.returncode == 2
    assert "started with other settings (train_steps: 4000 -> 5000)" in proc.stderr


@pytest.mark.process
def test_a_search_killed_mid_trial_resumes_with_a_new_trial_and_no_reused_folder(
    tmp_path, lr_space
):
    optuna = needs_optuna()
    output_dir = str(tmp_path / "search")
    command = search_command(output_dir, lr_space, 1, train_steps=LONG_TRIAL)
    search = subprocess.Popen(command, cwd=ROOT, stderr=subprocess.DEVNULL)
    first_eval = os.path.join(output_dir, "trial_0", "eval.jsonl")
    wait_for(
        lambda: os.path.exists(first_eval) and os.path.getsize(first_eval) > 0,
        "evaluation line of trial 0",
        process=search,
    )
    search.kill()
    search.wait()
    killed = optuna.load_study(study_name="rl_search", storage=f"sqlite:///{output_dir}/study.db")
    assert [t.state.name for t in killed.trials] == ["RUNNING"]  # killed mid-trial
    # Its train.py got SIGTERM when the search died: it saves a checkpoint and exits.
    wait_for(
        lambda: not pids_naming(os.path.join(output_dir, "trial_0")),
        "exit of trial 0's train.py",
    )

    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)

    assert proc.returncode == 0, proc.stderr
    assert "trial 0 was running when the search was stopped" in proc.stderr
    rows = read_trials(output_dir)
    assert [(r["number"], r["state"], r["run_folder"]) for r in rows] == [
        ("0", "FAIL", "trial_0"),
        ("1", "COMPLETE", "trial_1"),
    ]
    assert rows[0]["note"] == "stopped with the search; retried as trial 1"
    assert rows[1]["note"] == "retry of trial 0" and rows[1]["params"] == rows[0]["params"]
    assert rows[1]["last_step"] == str(LONG_TRIAL)
    assert trial_folders(output_dir) == ["trial_0", "trial_1"]
    with open(os.path.join(output_dir, "best.json")) as f:
        assert json.load(f)["run_folder"] == "trial_1"


@pytest.mark.process
def test_a_trial_whose_train_py_is_killed_is_retried_once(tmp_path, lr_space):
    needs_optuna()
    output_dir = str(tmp_path / "search")
    search = subprocess.Popen(
        search_command(output_dir, lr_space, 1, "--pruner=none", train_steps=LONG_TRIAL),
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    first_eval = os.path.join(output_dir, "trial_0", "eval.jsonl")
    wait_for(
        lambda: os.path.exists(first_eval) and os.path.getsize(first_eval) > 0,
        "evaluation line of trial 0",
        process=search,
    )
    for pid in pids_naming(os.path.join(output_dir, "trial_0")):
        os.kill(pid, signal.SIGKILL)  # as the OOM killer would
    _, stderr = search.communicate(timeout=600)

    assert search.returncode == 0, stderr
    assert "trial 0 was killed by signal 9; its params are queued again" in stderr
    rows = read_trials(output_dir)
    assert [(r["number"], r["state"], r["note"]) for r in rows] == [
        ("0", "FAIL", "killed by signal 9; retried as trial 1"),
        ("1", "COMPLETE", "retry of trial 0"),
    ]  # a failure of its params before: the search ended with no result


@pytest.mark.process
def test_the_median_pruner_stops_the_trial_that_does_not_learn(tmp_path, lr_space):
    needs_optuna()
    output_dir = str(tmp_path / "search")
    proc = run_search(
        output_dir,
        lr_space,
        2,
        "--pruner=median",
        "--pruner_startup_trials=1",
        train_steps=LONG_TRIAL,
    )
    assert proc.returncode == 0, proc.stderr
    rows = read_trials(output_dir)
    assert [(r["params"], r["state"]) for r in rows] == [
        (f"learning_rate={GOOD_LR}", "COMPLETE"),
        (f"learning_rate={USELESS_LR}", "PRUNED"),
    ]
    assert rows[1]["last_step"] == "2000" and rows[1]["note"] == "pruned at step 2000"
    # Its train.py got SIGTERM (saved a checkpoint and stopped) long before its last step.
    with open(os.path.join(output_dir, "logs", "trial_1.log")) as f:
        final = json.loads(f.read().strip().splitlines()[-1])
    assert final["interrupted"] == signal.SIGTERM and final["step"] < LONG_TRIAL


@pytest.mark.process
def test_evaluations_that_come_with_the_final_one_do_not_prune_the_finished_trial(
    tmp_path, lr_space
):
    # With checkpoints only at the end, every evaluation reaches the search with the final
    # one: the trial that did not learn was marked pruned at step 2000 after it had run to
    # its last step, and its final evaluation was dropped.
    needs_optuna()
    output_dir = str(tmp_path / "search")
    late = "--hparam_override=eval_interval=2000,checkpoint_interval=4000,eval_episodes=5"
    proc = run_search(output_dir, lr_space, 2, "--pruner_startup_trials=1", late)
    assert proc.returncode == 0, proc.stderr
    rows = read_trials(output_dir)
    assert [(r["state"], r["last_step"]) for r in rows] == [("COMPLETE", "4000")] * 2


@pytest.mark.process
def test_a_search_of_copies_scores_trials_as_the_benchmark_scores_sets(tmp_path, lr_space):
    # Seeds make single runs of a set differ by more than settings do (a2c_lunar_lander:
    # -18 to 203), so a trial can train copies and be scored on their interquartile mean,
    # the statistic of the benchmark's table. Pruning acts on the copies' joint curve.
    needs_optuna()
    output_dir = str(tmp_path / "search")
    copies = ("--copies=2", "--copies_parallel=2")
    proc = run_search(
        output_dir, lr_space, 2, "--pruner_startup_trials=1", *copies, train_steps=LONG_TRIAL
    )
    assert proc.returncode == 0, proc.stderr
    rows = read_trials(output_dir)
    assert [(r["params"], r["state"]) for r in rows] == [
        (f"learning_rate={GOOD_LR}", "COMPLETE"),
        (f"learning_rate={USELESS_LR}", "PRUNED"),
    ]
    with open(os.path.join(output_dir, "trial_0", "summary.json")) as f:
        summary = json.load(f)  # train.py --copies's own summary of the two copies
    assert summary["num_runs"] == 2
    assert float(rows[0]["value"]) == pytest.approx(summary["final_return_iqm"])
    assert rows[1]["note"] == "pruned at step 2000"
    for i in range(2):  # both copies of the pruned trial stopped, long before the end,
        run_dir = os.path.join(output_dir, "trial_1", f"run_{i}")  # and before train.py
        with open(os.path.join(run_dir, "eval.jsonl")) as f:
            assert json.loads(f.readlines()[-1])["step"] < LONG_TRIAL
        assert not pids_naming(run_dir)
    with open(os.path.join(output_dir, "logs", "trial_1.log")) as f:
        finals = [json.loads(line) for line in f if line.startswith('{"step"')]
    assert [final["interrupted"] for final in finals] == [signal.SIGTERM] * 2
    with open(os.path.join(output_dir, "best.json")) as f:
        best = json.load(f)
    objective = "interquartile mean over 2 copies of the final evaluation's return_mean"
    assert best["objective"] == objective and best["command"].endswith(
        "--seed 0 --copies 2 --output_dir runs/best"
    )
    assert f"best: trial 0, {objective} " in proc.stdout
    # The number of copies is part of what the study measures.
    proc = run_search(output_dir, lr_space, 3, "--copies=3", train_steps=LONG_TRIAL)
    assert proc.returncode == 2 and "started with other settings (the objective: " in proc.stderr


@pytest.mark.slow
def test_sigterm_stops_the_trials_and_the_same_command_finishes_them(tmp_path, lr_space):
    needs_optuna()
    output_dir = str(tmp_path / "search")
    command = search_command(output_dir, lr_space, 1, train_steps=LONG_TRIAL)
    search = subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    first_eval = os.path.join(output_dir, "trial_0", "eval.jsonl")
    wait_for(
        lambda: os.path.exists(first_eval) and os.path.getsize(first_eval) > 0,
        "evaluation line of trial 0",
        process=search,
    )
    search.send_signal(signal.SIGTERM)
    _, stderr = search.communicate(timeout=600)
    assert search.returncode == 128 + signal.SIGTERM, stderr
    assert "got signal 15" in stderr
    rows = read_trials(output_dir)
    assert [(r["state"], r["note"]) for r in rows] == [
        ("FAIL", "stopped with the search; retried as trial 1"),
        ("WAITING", "retry of trial 0; queued"),
    ]
    assert not pids_naming(os.path.join(output_dir, "trial_0"))

    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)

    assert proc.returncode == 0, proc.stderr
    assert [r["state"] for r in read_trials(output_dir)] == ["FAIL", "COMPLETE"]


@pytest.mark.slow
def test_trials_run_as_ray_actors_with_sys_ray(tmp_path, lr_space):
    needs_optuna()
    pytest.importorskip("ray")
    output_dir = str(tmp_path / "search")
    proc = run_search(output_dir, lr_space, 2, "--sys=ray", "--parallel=2", "--pruner=none")
    assert proc.returncode == 0, proc.stderr
    rows = read_trials(output_dir)
    assert [r["state"] for r in rows] == ["COMPLETE", "COMPLETE"]
    values = {float(r["params"].split("=")[1]): float(r["value"]) for r in rows}
    assert values[GOOD_LR] > values[USELESS_LR]
    assert trial_folders(output_dir) == ["trial_0", "trial_1"]


# --- a Ray actor that does not answer ----------------------------------------------------
@pytest.mark.unit
def test_a_ray_trial_whose_actor_does_not_answer_fails_once_with_the_reason():
    ray = pytest.importorskip("ray")
    waits = []

    class Method:
        def remote(self, *args):
            return "ref"

    class HungRay:
        exceptions = ray.exceptions

        def get(self, ref, timeout=None):
            waits.append(timeout)
            raise ray.exceptions.GetTimeoutError("Get timed out")

        def kill(self, actor, no_restart):
            waits.append("killed")

    trial = trials.RayTrialProcess.__new__(trials.RayTrialProcess)
    trial._ray, trial._error, trial.actor = HungRay(), "", type("Actor", (), {})()
    for name in ("poll", "kill", "last_line"):
        setattr(trial.actor, name, Method())
    assert trial.poll(-1) == ([], 1)  # a failed trial
    assert trial.last_line() == (
        f"the Ray actor did not answer poll within {trials.ACTOR_ANSWER_SECONDS:g} s "
        "(hung, or its node stopped)"
    )
    trial.close()
    assert waits == [trials.ACTOR_ANSWER_SECONDS, "killed"]  # one bounded wait, no second
