"""models: networks as tf.Modules, built by name from model settings and env spaces.

A model class takes ``(settings, observation_space, action_space, seed)``;
its ``outputs`` says what its ``policy(obs)`` gives act_select: an action
distribution ("distribution") or Q-values ("q_values"). ``settings.py`` holds
the fields that shape a network, ``distributions.py`` the policy heads.
"""

from rl import registry

# Imported on first lookup (rl/registry.py): naming them does not load TensorFlow.
registry.models.declare("actor_critic", "rl.models.networks:ActorCritic")
registry.models.declare("q_network", "rl.models.networks:QNetwork")
registry.models.declare("squashed_gaussian_q", "rl.models.networks:SquashedGaussianActorQ")
registry.models.declare("deterministic_actor_q", "rl.models.networks:DeterministicActorQ")
