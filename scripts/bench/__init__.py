"""The benchmark behind scripts/benchmark.py, one module a job.

Imports flow one way, top to bottom (declared in .importlinter, held by tests/test_layers.py):

- ``cli``: the command line, its modes and the report.
- ``checks``: the input checks that end in one line and exit code 2 before slow work.
- the modes, which do not import each other: ``tables`` (rl alone, and rl beside its
  peer), ``suite`` (the classic suite), ``compare`` (two folders of results, set by
  set), ``workers`` (throughput against actor processes), ``remote`` (envs over gRPC).
- what the tables are made of: ``runs`` (whole train.py runs), ``peer_runs`` (one
  Stable-Baselines3 run), below them ``peer_checkpoints`` (a long peer run's saves).
- shared by the rest: ``costs`` (per-call costs of this machine), ``peer_settings`` (the
  peer of each set), ``columns`` (the printed tables' pieces), ``scores`` (what a return
  means on each env, and the statistics over seeds from rliable), and at the bottom
  ``children`` (the child processes and one-line failure).
"""
