"""The learners' optimizers: Keras's, with Adam stepped by TensorFlow's fused kernel.

Keras 3's Adam builds each variable's step from about twenty element-wise ops
(casts, powers, reads, the moment updates). In a compiled update of a small
network those ops, not the arithmetic, are the cost: PPO's CartPole update has
12 variables and 20 gradient steps. TensorFlow's ``ResourceApplyAdam`` kernel
takes one op per variable for the same maths (Kingma & Ba 2015, with the bias
correction folded into the step size, as Keras does). ``FusedAdam`` keeps Keras's
Adam as it is (its slots, iterations, learning-rate variable and checkpoint
layout), and replaces the step: one fused op per variable, with the step size
computed once for all of them. With several replicas
(``--sys mirrored``, ``tpu``) the variables are distributed and Keras's own step
is used.
"""

from rl._tf import keras, tf


class FusedAdam(keras.optimizers.Adam):
    """Keras's Adam, stepped by TensorFlow's fused Adam kernel on one replica.

    Only what rl's learners use: no weight decay, EMA, gradient accumulation,
    loss scaling or AMSGrad (``build_optimizer`` passes none of them).
    """

    def apply_gradients(self, grads_and_vars):
        if self._distribution_strategy.num_replicas_in_sync > 1 or not self.built:
            return super().apply_gradients(grads_and_vars)
        step = tf.cast(self.iterations + 1, tf.float32)
        beta_1, beta_2 = tf.constant(self.beta_1, tf.float32), tf.constant(self.beta_2, tf.float32)
        shared = {
            "beta1_power": tf.pow(beta_1, step),
            "beta2_power": tf.pow(beta_2, step),
            "lr": tf.cast(self.learning_rate, tf.float32),
            "beta1": beta_1,
            "beta2": beta_2,
            "epsilon": tf.constant(self.epsilon, tf.float32),
        }
        for gradient, variable in grads_and_vars:
            if gradient is None:  # a variable the loss does not reach: left as it is
                continue
            index = self._get_variable_index(variable)
            tf.raw_ops.ResourceApplyAdam(
                var=_handle(variable),
                m=_handle(self._momentums[index]),
                v=_handle(self._velocities[index]),
                grad=gradient,
                **shared,
            )
        self.iterations.assign_add(1)
        return self.iterations


def _handle(variable) -> tf.Tensor:
    """The resource handle of a tf.Variable or of the tf.Variable a Keras variable holds."""
    return variable.value.handle if isinstance(variable, keras.Variable) else variable.handle


def build_optimizer(hp, learning_rate: float):
    """The optimizer ``hp.optimizer`` names: "adam" (``FusedAdam``) or "rmsprop".

    Args:
        hp: resolved hparams (``optimizer``, ``rmsprop_epsilon``).
        learning_rate: its step size (the learner's or another optimizer's).
    """
    if hp.optimizer == "rmsprop":
        # As in A2C (Mnih et al. 2016) and Stable-Baselines3's A2C: decay 0.99, no
        # momentum. Keras adds epsilon under the root, g / sqrt(v + eps) (as TF1 did, and
        # OpenAI Baselines' A2C with eps 1e-5); PyTorch, which SB3 uses, adds it to the
        # root, g / (sqrt(v) + 1e-5). hparams.base.HParams.rmsprop_epsilon says which.
        return keras.optimizers.RMSprop(
            learning_rate=learning_rate, rho=0.99, epsilon=hp.rmsprop_epsilon
        )
    return FusedAdam(learning_rate=learning_rate)
