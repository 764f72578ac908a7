"""rl's version, in the lowest layer so modules that record it (tracking, the env
server) need not import the package face ``rl``, which reaches up to the experiment."""

__version__ = "0.1.0"
