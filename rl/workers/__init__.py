"""workers: actors in other processes (or on other machines) feeding one learner.

``--num_workers N`` starts N actor processes. Each steps its share of the
run's ``num_envs`` env copies with its own actor and random stream, and sends
back rounds of ``round_steps`` vectorised steps together with the version of
the weights that acted. The learner in the main process takes one round from
every worker at a time, in worker order, so it sees the same [steps, num_envs]
stream of transitions as with one process; weights travel to the workers as
``PolicySnapshot``s.

- ``messages.py``: what travels between them (TensorFlow-free);
- ``process.py``: the actor process (``python -m rl.workers.process``);
- ``pool.py``: the learner's side: starting, feeding, restarting and stopping workers;
- ``link.py``: a worker's connection with a sending and a receiving thread, so that no
  worker (hung, stopped) can block the learner;
- ``experience.py``: the pool as the learner's experience source (rl/agents/experience.py),
  each round of every worker merged into [num_envs] steps.
"""
