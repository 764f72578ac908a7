"""models: networks as tf.Modules, built by name from hparams and env spaces.

A model class takes ``(hp, input_size, num_actions, seed)`` and exposes
``preferences(obs)``: what the act_select chooses actions from.
"""

from rl.models import mlp  # noqa: F401  (registers)
