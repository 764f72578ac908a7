"""Trains (or tests) any registered agent: one entry point for every algorithm.

    python train.py --sys local --hparams ppo_cartpole --output_dir runs/x

Rerunning the same command resumes from the latest checkpoint. Bad input
gets one line on stderr and exit code 2, before anything is written.
"""

from absl import app, flags

from rl.cli import flag_table, jobs

if __name__ == "__main__":
    flag_table.define_flags()
    # So --help lists them (absl shows the main module's).
    flags.adopt_module_key_flags(flag_table)
    app.run(jobs.main, flags_parser=flag_table.parse_flags_or_exit)
