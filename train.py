"""Trains (or tests) any registered agent: one entry point for every algorithm.

    python train.py --sys local --hparams ppo_cartpole --output_dir runs/x

Rerunning the same command resumes from the latest checkpoint. Bad input
gets one line on stderr and exit code 2, before anything is written.
"""

from absl import app, flags

from rl import cli

if __name__ == "__main__":
    cli.define_flags()
    flags.adopt_module_key_flags(cli)  # so --help lists them (absl shows the main module's)
    app.run(cli.main, flags_parser=cli.parse_flags_or_exit)
