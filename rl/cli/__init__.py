"""cli: train.py's command line, one module per job.

``flag_table.py``: the flags and their parsing, and ``fail`` (one line, exit code 2);
``checks.py``: the early checks, before TensorFlow loads; ``exits.py``: the exit codes and
closing lines of runs that failed; ``training.py``: one run trained; ``testing.py``:
--training=false; ``copies.py``: --copies N; ``jobs.py``: ``main``, which picks the job.
"""
