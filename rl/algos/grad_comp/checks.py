"""Input checks shared by the losses: ranks and agreeing shapes, at trace time.

Like trfl's ``assert_rank_and_shape_compatibility``: a [B] tensor beside a
[B, 1] one broadcasts silently into a [B, B] loss, so ranks alone are not
enough. The checks read static shapes, so they cost nothing per call.
"""

from typing import Dict, Optional

from rl._tf import tf


def check_inputs(where: str, rank: int, tensors: Dict[str, Optional[tf.Tensor]]) -> None:
    """Every tensor has ``rank`` and all their shapes agree (unknown dims agree with any).

    Args:
        where: the calling function's name, for the message.
        rank: the rank every tensor must have.
        tensors: name -> tensor; None entries are skipped.

    Raises:
        ValueError: naming the tensor and the shapes that disagree.
    """
    first_name, first_shape = None, None
    for name, tensor in tensors.items():
        if tensor is None:
            continue
        shape = tf.TensorShape(tensor.shape)
        if shape.rank != rank:
            raise ValueError(f"{where}: {name} must have rank {rank}, got shape {shape}")
        if first_shape is not None and not shape.is_compatible_with(first_shape):
            raise ValueError(
                f"{where}: {name} has shape {shape} but {first_name} has {first_shape}"
            )
        if first_shape is None:
            first_name, first_shape = name, shape


def check_leading(where: str, outer: Dict[str, tf.Tensor], inner: Dict[str, tf.Tensor]) -> None:
    """Each ``outer`` tensor (e.g. Q-values [B, A]) starts with the shape of the ``inner`` ones ([B])."""
    for inner_name, inner_tensor in inner.items():
        for name, tensor in outer.items():
            lead = tf.TensorShape(tensor.shape)[: inner_tensor.shape.rank]
            if not lead.is_compatible_with(inner_tensor.shape):
                raise ValueError(
                    f"{where}: {name} has shape {tensor.shape}, which does not start with "
                    f"{inner_name}'s {inner_tensor.shape}"
                )


def weighted_mean(values: tf.Tensor, weights: Optional[tf.Tensor] = None) -> tf.Tensor:
    """The mean of per-example values, optionally weighted (importance weights)."""
    if weights is None:
        return tf.reduce_mean(values)
    return tf.reduce_mean(values * weights)
