"""Command-line tools beside train.py; a package so that scripts/benchmark.py's own package,
scripts/bench, is imported as ``scripts.bench``."""
