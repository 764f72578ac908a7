"""The benchmark behind scripts/benchmark.py, one module a job.

Imports flow one way, top to bottom (tests/test_benchmark.py holds it):

- ``cli``: the command line, its modes and the report.
- ``checks``: the input checks that end in one line and exit code 2 before slow work.
- ``tables`` (rl-only and rl beside its peer), ``suite`` (the classic suite), ``workers``
  (throughput against actor processes), ``remote`` (envs over gRPC): the modes.
- ``runs`` (whole train.py runs), ``peer_runs`` (one Stable-Baselines3 run),
  ``peer_saves`` (a long peer run's saves): what the modes are made of.
- ``costs`` (per-call costs of this machine), ``peer_settings`` (the peer of each set),
  ``columns`` (the printed tables' pieces), ``children`` (the child processes and
  one-line failure): shared by the rest.
"""
