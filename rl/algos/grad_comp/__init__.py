"""grad_comp: the maths of learning as pure functions, tensors in and out.

Each module holds one loss or estimator, batch first, with shapes in its
docstring; the functions are registered by name and tested on hand-computed
values. Agents call them inside their compiled update step. The DQN family's
entries take a ``QBatch`` and the hparams (q_batch.py) and call their maths.
"""

from rl import registry

# Imported on first lookup (rl/registry.py): naming them does not load TensorFlow.
registry.grad_comp.declare("ppo_clip", "rl.algos.grad_comp.ppo:ppo_clip_loss")
registry.grad_comp.declare("gae", "rl.algos.grad_comp.gae:gae_advantages")
# The DQN family's: name(batch: QBatch, hp) -> (loss [B], extras with "priority").
registry.grad_comp.declare("dqn_td", "rl.algos.grad_comp.dqn:dqn_td")
registry.grad_comp.declare("categorical_td", "rl.algos.grad_comp.dqn:categorical_td")
registry.grad_comp.declare("quantile_td", "rl.algos.grad_comp.quantile:quantile_td")
registry.grad_comp.declare("vtrace", "rl.algos.grad_comp.vtrace:vtrace_loss")
registry.grad_comp.declare(
    "policy_gradient", "rl.algos.grad_comp.policy_gradient:policy_gradient_loss"
)
registry.grad_comp.declare(
    "deterministic_policy_gradient",
    "rl.algos.grad_comp.actor_critic_q:deterministic_policy_gradient",
)
registry.grad_comp.declare("sac", "rl.algos.grad_comp.actor_critic_q:soft_actor_critic")
