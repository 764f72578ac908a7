"""Model settings: the fields that shape a network, in one home.

Agent hparams classes inherit them (``PPOHParams(HParams, ModelSettings)``),
so they stay flat on the command line (``--hparam_override hidden_sizes=[128]``)
while the models read only these.
"""

import dataclasses
from typing import Tuple

from rl.fields import ACTIVATIONS, bounded, one_of

TORSOS = ("mlp", "nature_cnn")


@dataclasses.dataclass(frozen=True)
class ModelSettings:
    torso: str = one_of("mlp", TORSOS)  # "mlp", or "nature_cnn" for image observations
    hidden_sizes: Tuple[int, ...] = bounded((64, 64), 1, 4096, max_items=8)  # MLP layer widths
    activation: str = one_of("tanh", ACTIVATIONS)  # hidden-layer tf.keras.activations name
    action_distribution: str = one_of(
        "auto", ("auto", "gaussian", "tanh_gaussian")
    )  # Box policies: auto = tanh-squashed if bounded; "gaussian" clips samples to the bounds
    log_std_init: float = bounded(0.0, -20.0, 2.0)  # a Gaussian policy's initial log std
    # Games: the observation's last A entries mark the legal moves (rl/games/versus.py);
    # illegal ones get logits or Q-values of ILLEGAL_SCORE, so they are never chosen.
    action_mask: bool = False
    # Centre and scale observations by running statistics the learner keeps (as SB3's
    # VecNormalize does); they live in the model, so artefacts and exports carry them.
    normalize_observations: bool = False
    observation_clip: float = bounded(10.0, 0.1, 1e6)  # normalised observations stay within +-this


@dataclasses.dataclass(frozen=True)
class QHeadSettings:
    """What shapes a Q-network's head (DQN's switches towards Rainbow)."""

    dueling: bool = False  # Q = V + A - mean_a A, from one torso (Wang et al. 2016)
    # Factorised Gaussian noisy layers (Fortunato et al. 2018): acting weights are redrawn
    # after every update, each gradient step draws its own noise.
    noisy: bool = False
    noisy_sigma0: float = bounded(0.5, 0.0, 10.0)  # initial noise scale: sigma0 / sqrt(fan-in)
    num_atoms: int = bounded(1, 1, 1001)  # 1: expected Q-values; > 1: C51's return distribution
    v_min: float = bounded(-10.0, -1e6, 1e6)  # C51: the lowest return on the support
    v_max: float = bounded(10.0, -1e6, 1e6)  # C51: the highest return on the support
    # > 1: QR-DQN's return distribution, this many quantiles per action (Dabney et al. 2018)
    num_quantiles: int = bounded(1, 1, 1001)
