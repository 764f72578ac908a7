"""models: networks as tf.Modules, built by name from hparams and env spaces.

A model class takes ``(hp, input_size, num_actions, seed)`` and exposes
``preferences(obs)``: what the act_select chooses actions from.
"""

from rl import registry

# Imported on first lookup (rl/registry.py): naming them does not load TensorFlow.
registry.models.declare("mlp_actor_critic", "rl.models.mlp:ActorCritic")
registry.models.declare("mlp_q", "rl.models.mlp:QNetwork")
