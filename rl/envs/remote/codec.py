"""Arrays, observation trees, spaces and infos to and from env.proto's messages.

Both ends use these functions, so what one encodes the other decodes exactly.
Decoding checks everything a hostile peer could get wrong (unknown dtypes, a
shape that does not match the bytes, nesting deeper than any space) and raises
``CodecError`` with a message the server returns as INVALID_ARGUMENT.

Only NumPy, Gymnasium and protobuf are imported: an env server runs in a
virtualenv without TensorFlow, possibly with an older Gymnasium (0.29).
"""

import json
import math
from typing import Any, Callable, Dict, List, Optional

import gymnasium as gym
import numpy as np

from rl.envs.remote import env_pb2
from rl.files import JSONNestingError, loads_json

# The dtypes that cross the wire; anything else (object, strings, datetimes) is refused.
DTYPES = frozenset(
    ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
    + ["float16", "float32", "float64"]
)
_NAMES = {np.dtype(name).newbyteorder("<"): name for name in DTYPES}  # little-endian only
_WIRE_DTYPES = {name: np.dtype(name).newbyteorder("<") for name in DTYPES}
MAX_DEPTH = 16  # nesting of Tuple/Dict spaces and values
MAX_RANK = 32


# Keepalive, the same at both ends: a connection silent this long is pinged, and one whose
# ping is unanswered this long is closed. So a peer gone without closing it (its machine
# lost, a half-open TCP connection) is noticed, and the server thread its step stream
# holds is freed.
KEEPALIVE_SECONDS = 60.0
KEEPALIVE_TIMEOUT_SECONDS = 10.0


def keepalive_options(seconds: float, timeout_seconds: float) -> list:
    """gRPC channel or server options for keepalive pings every ``seconds``, answered
    within ``timeout_seconds``."""
    return [
        ("grpc.keepalive_time_ms", int(seconds * 1000)),
        ("grpc.keepalive_timeout_ms", int(timeout_seconds * 1000)),
        # grpcio 1.85 times a keepalive ping out by this one, not the one above (tested).
        ("grpc.http2.ping_timeout_ms", int(timeout_seconds * 1000)),
    ]


# The trailing metadata of a call refused because its session is busy with another (a
# call the client gave up on, still running): the client retries it; an ABORTED status
# without it is an error like any other.
BUSY_METADATA = ("rl-session-busy", "1")


class CodecError(ValueError):
    """A message that does not decode into what it claims to be."""


# --- tensors ---------------------------------------------------------------------
def encode_tensor(array: Any) -> env_pb2.Tensor:
    """A NumPy array (or scalar) as {dtype, shape, little-endian bytes}."""
    array = np.asarray(array)
    name = _NAMES.get(array.dtype)  # a dict lookup: dtype.name costs microseconds
    if name is None:
        if array.dtype.name not in DTYPES:
            raise CodecError(
                f"dtype {array.dtype} cannot be sent: valid: {', '.join(sorted(DTYPES))}"
            )
        name = array.dtype.name
        array = array.astype(array.dtype.newbyteorder("<"))
    return env_pb2.Tensor(dtype=name, shape=array.shape, data=array.tobytes())


def decode_tensor(tensor: env_pb2.Tensor) -> np.ndarray:
    """The array a Tensor message holds (a writable copy).

    Raises:
      CodecError: unknown dtype, negative or too many dimensions, or a byte count
        that does not match the shape.
    """
    if tensor.dtype not in DTYPES:
        raise CodecError(
            f"unknown tensor dtype {tensor.dtype!r}: valid: {', '.join(sorted(DTYPES))}"
        )
    shape = tuple(tensor.shape)
    if len(shape) > MAX_RANK or any(d < 0 for d in shape):
        raise CodecError(f"invalid tensor shape {list(shape)}")
    dtype = _WIRE_DTYPES[tensor.dtype]
    expected = math.prod(shape) * dtype.itemsize
    if expected != len(tensor.data):
        raise CodecError(
            f"tensor of shape {list(shape)} and dtype {tensor.dtype} needs {expected} bytes, "
            f"got {len(tensor.data)}"
        )
    try:
        array = np.frombuffer(tensor.data, dtype=dtype).reshape(shape)
    except ValueError as e:  # e.g. an empty shape with dimensions NumPy cannot hold
        raise CodecError(f"invalid tensor shape {list(shape)}: {e}") from None
    return array.astype(dtype.newbyteorder("=")) if dtype.byteorder == ">" else array.copy()


# --- values: arrays, tuples and dicts of them --------------------------------------
def encode_value(value: Any, depth: int = 0) -> env_pb2.Value:
    """An array, or a tuple or dict of them (a Tuple or Dict space's sample), as a Value."""
    if depth > MAX_DEPTH:
        raise CodecError(f"value nested deeper than {MAX_DEPTH}")
    if isinstance(value, dict):
        keys = list(value)
        return env_pb2.Value(
            dict=env_pb2.ValueDict(
                keys=keys, values=[encode_value(value[k], depth + 1) for k in keys]
            )
        )
    # A tuple is always a Tuple space's value (even empty); a list of numbers is an array.
    if isinstance(value, tuple) or (isinstance(value, list) and not _is_numeric_sequence(value)):
        return env_pb2.Value(
            tuple=env_pb2.ValueList(items=[encode_value(v, depth + 1) for v in value])
        )
    return env_pb2.Value(tensor=encode_tensor(value))


def _is_numeric_sequence(value) -> bool:
    return all(isinstance(v, (int, float, bool, np.number, np.bool_)) for v in value)


def decode_value(value: env_pb2.Value, depth: int = 0) -> Any:
    """The array, tuple or dict a Value holds.

    Raises:
      CodecError: an empty Value, a dict with mismatched keys and values, or too deep.
    """
    if depth > MAX_DEPTH:
        raise CodecError(f"value nested deeper than {MAX_DEPTH}")
    kind = value.WhichOneof("kind")
    if kind == "tensor":
        return decode_tensor(value.tensor)
    if kind == "tuple":
        return tuple(decode_value(v, depth + 1) for v in value.tuple.items)
    if kind == "dict":
        if len(value.dict.keys) != len(value.dict.values):
            raise CodecError("a dict value needs as many values as keys")
        if len(set(value.dict.keys)) != len(value.dict.keys):
            raise CodecError("a dict value has a repeated key")
        return {k: decode_value(v, depth + 1) for k, v in zip(value.dict.keys, value.dict.values)}
    raise CodecError("empty value: set one of tensor, tuple, dict")


# --- spaces ----------------------------------------------------------------------
def encode_space(space: gym.Space, depth: int = 0) -> env_pb2.Space:
    """A Box, Discrete, MultiDiscrete, MultiBinary, Tuple or Dict space as a message.

    Raises:
      CodecError: for any other space (Text, Graph, Sequence, ...).
    """
    if depth > MAX_DEPTH:
        raise CodecError(f"space nested deeper than {MAX_DEPTH}")
    if isinstance(space, gym.spaces.Box):
        return env_pb2.Space(
            box=env_pb2.BoxSpace(low=encode_tensor(space.low), high=encode_tensor(space.high))
        )
    if isinstance(space, gym.spaces.Discrete):
        return env_pb2.Space(discrete=env_pb2.DiscreteSpace(n=int(space.n), start=int(space.start)))
    if isinstance(space, gym.spaces.MultiDiscrete):
        start = getattr(space, "start", np.zeros_like(space.nvec))  # Gymnasium >= 1.0
        return env_pb2.Space(
            multi_discrete=env_pb2.MultiDiscreteSpace(
                nvec=encode_tensor(space.nvec), start=encode_tensor(np.asarray(start))
            )
        )
    if isinstance(space, gym.spaces.MultiBinary):
        return env_pb2.Space(multi_binary=env_pb2.MultiBinarySpace(shape=space.shape))
    if isinstance(space, gym.spaces.Tuple):
        return env_pb2.Space(
            tuple=env_pb2.TupleSpace(spaces=[encode_space(s, depth + 1) for s in space.spaces])
        )
    if isinstance(space, gym.spaces.Dict):
        keys = list(space.spaces)
        return env_pb2.Space(
            dict=env_pb2.DictSpace(
                keys=keys, spaces=[encode_space(space.spaces[k], depth + 1) for k in keys]
            )
        )
    raise CodecError(
        f"{type(space).__name__} spaces cannot be served: valid: Box, Discrete, MultiDiscrete, "
        "MultiBinary, Tuple, Dict"
    )


def decode_space(message: env_pb2.Space, depth: int = 0) -> gym.Space:
    """The Gymnasium space a Space message describes."""
    if depth > MAX_DEPTH:
        raise CodecError(f"space nested deeper than {MAX_DEPTH}")
    kind = message.WhichOneof("kind")
    try:
        if kind == "box":
            low, high = decode_tensor(message.box.low), decode_tensor(message.box.high)
            return gym.spaces.Box(low=low, high=high, dtype=low.dtype)
        if kind == "discrete":
            return gym.spaces.Discrete(message.discrete.n, start=message.discrete.start)
        if kind == "multi_discrete":
            nvec = decode_tensor(message.multi_discrete.nvec)
            start = decode_tensor(message.multi_discrete.start)
            return gym.spaces.MultiDiscrete(nvec, start=start)
        if kind == "multi_binary":
            shape = list(message.multi_binary.shape)
            # Gymnasium's == tells MultiBinary(4) from MultiBinary([4]): 1-D goes back as an int.
            return gym.spaces.MultiBinary(shape[0] if len(shape) == 1 else shape)
        if kind == "tuple":
            return gym.spaces.Tuple([decode_space(s, depth + 1) for s in message.tuple.spaces])
        if kind == "dict":
            if len(message.dict.keys) != len(message.dict.spaces):
                raise CodecError("a dict space needs as many spaces as keys")
            # Pairs, not a dict: Gymnasium sorts a dict's keys, and the server's order is
            # what flattening follows on both ends.
            return gym.spaces.Dict(
                [
                    (k, decode_space(s, depth + 1))
                    for k, s in zip(message.dict.keys, message.dict.spaces)
                ]
            )
    except CodecError:
        raise
    except (ValueError, TypeError, AssertionError) as e:
        raise CodecError(f"invalid {kind} space: {e}") from None
    raise CodecError(
        "empty space: set one of box, discrete, multi_discrete, multi_binary, tuple, dict"
    )


# --- batches of a space's samples ---------------------------------------------------
def unstack(
    space: gym.Space,
    batched: Any,
    n: int,
    leaf: Callable[[gym.Space, np.ndarray], List[Any]] = lambda space, array: list(array),
) -> List[Any]:
    """``n`` samples of ``space`` from a batch stacked on axis 0 (tuples and dicts per leaf).

    Args:
      space: one sample's space.
      batched: the batch (arrays, or tuples and dicts of them).
      n: samples in the batch.
      leaf: (leaf space, [n, ...] array) -> the n samples of that leaf.
    """
    if isinstance(space, gym.spaces.Tuple):
        parts = [unstack(s, batched[i], n, leaf) for i, s in enumerate(space.spaces)]
        return [tuple(part[j] for part in parts) for j in range(n)]
    if isinstance(space, gym.spaces.Dict):
        parts = {k: unstack(s, batched[k], n, leaf) for k, s in space.spaces.items()}
        return [{k: part[j] for k, part in parts.items()} for j in range(n)]
    return leaf(space, batched)


# --- checking values against spaces -------------------------------------------------
def mismatch(space: gym.Space, value: Any, batch: Optional[int] = None, path: str = "") -> str:
    """Why ``value`` is not ``batch`` samples of ``space`` stacked on axis 0 (or one sample
    if ``batch`` is None), or "" if it is. Checks structure, shape, dtype kind, NaN and bounds."""
    where = path or "value"
    if isinstance(space, gym.spaces.Tuple):
        if not isinstance(value, tuple) or len(value) != len(space.spaces):
            return f"{where} must be a tuple of {len(space.spaces)}"
        for i, (s, v) in enumerate(zip(space.spaces, value)):
            found = mismatch(s, v, batch, f"{where}[{i}]")
            if found:
                return found
        return ""
    if isinstance(space, gym.spaces.Dict):
        if not isinstance(value, dict) or set(value) != set(space.spaces):
            return f"{where} must be a dict with keys {sorted(space.spaces)}"
        for key, s in space.spaces.items():
            found = mismatch(s, value[key], batch, f"{where}[{key!r}]")
            if found:
                return found
        return ""
    if not isinstance(value, np.ndarray):
        return f"{where} must be a tensor"
    shape = (() if batch is None else (batch,)) + tuple(space.shape or ())
    if value.shape != shape:
        return f"{where} has shape {list(value.shape)}, expected {list(shape)}"
    expected = np.dtype(space.dtype)
    if expected.kind in "iub" and value.dtype.kind not in "iub":
        return f"{where} has dtype {value.dtype}, expected {expected} (integers)"
    if expected.kind == "f" and value.dtype.kind not in "fiub":
        return f"{where} has dtype {value.dtype}, expected {expected}"
    if value.dtype.kind == "f" and not np.all(np.isfinite(value)):
        return f"{where} holds NaN or infinite values"
    outside = _outside(space, value.astype(expected, copy=False))
    if outside is not None:
        at = (
            ""
            if batch is None or outside.ndim == 0
            else f" (copy {int(np.flatnonzero(outside.reshape(len(value), -1).any(axis=1))[0])})"
        )
        return f"{where}{at} is outside {space}"
    return ""


def _outside(space: gym.Space, value: np.ndarray) -> Optional[np.ndarray]:
    """A mask of the entries of ``value`` (one sample or a batch) outside ``space``, or None."""
    if isinstance(space, gym.spaces.Box):
        mask = (value < space.low) | (value > space.high)
    elif isinstance(space, gym.spaces.Discrete):
        mask = (value < space.start) | (value >= space.start + space.n)
    elif isinstance(space, gym.spaces.MultiDiscrete):
        start = getattr(space, "start", 0)
        mask = (value < start) | (value >= start + space.nvec)
    elif isinstance(space, gym.spaces.MultiBinary):
        mask = (value != 0) & (value != 1)
    else:
        return None if space.contains(value) else np.array(True)
    return mask if mask.any() else None


# --- infos -----------------------------------------------------------------------
def jsonable(value: Any) -> Any:
    """``value`` with arrays and NumPy scalars as JSON types (anything else as its repr)."""
    if isinstance(value, np.ndarray):
        return value.tolist() if value.dtype.kind in "biuf" else repr(value)
    if isinstance(value, (np.generic,)):
        return value.item()
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return repr(value)


def encode_info(info: Dict[str, Any]) -> str:
    """An env's info dict as JSON ("" when empty; arrays become lists, the rest repr)."""
    if not info:
        return ""
    return json.dumps(jsonable(info), allow_nan=True)


def decode_info(text: str) -> Dict[str, Any]:
    """An info dict from ``encode_info``'s JSON (lists of numbers become arrays)."""
    if not text:
        return {}
    try:
        info = loads_json(text)
    except ValueError as e:
        raise CodecError(f"info is not JSON: {e}") from None
    if not isinstance(info, dict):
        raise CodecError("info must be a JSON object")
    return {k: _arrays(v) for k, v in info.items()}


def _arrays(value: Any) -> Any:
    if isinstance(value, list) and value and all(isinstance(v, (int, float)) for v in value):
        return np.asarray(value)
    if isinstance(value, dict):
        return {k: _arrays(v) for k, v in value.items()}
    return value


def decode_json_object(text: str, what: str) -> Dict[str, Any]:
    """A JSON object from a request field ("" = {}), or CodecError naming ``what``."""
    if not text:
        return {}
    try:
        value = loads_json(text)
    except JSONNestingError as e:
        raise CodecError(f"{what}: {e}") from None
    except ValueError as e:
        raise CodecError(f"{what} is not JSON: {e}") from None
    if not isinstance(value, dict):
        raise CodecError(f"{what} must be a JSON object, got {type(value).__name__}")
    return value


def batch_infos(infos: List[Dict[str, Any]]) -> Dict[str, Any]:
    """Per-copy info dicts in Gymnasium's vector form: key -> [N] values plus "_key" masks."""
    n = len(infos)
    batched: Dict[str, Any] = {}
    for i, info in enumerate(infos):
        for key, value in info.items():
            if key not in batched:
                if isinstance(value, (bool, np.bool_)):
                    batched[key] = np.zeros(n, dtype=bool)
                elif isinstance(value, (int, np.integer)):
                    batched[key] = np.zeros(n, dtype=np.int64)
                elif isinstance(value, (float, np.floating)):
                    batched[key] = np.zeros(n, dtype=np.float64)
                else:
                    batched[key] = np.full(n, None, dtype=object)
                batched["_" + key] = np.zeros(n, dtype=bool)
            try:
                batched[key][i] = value
            except (TypeError, ValueError):
                batched[key] = batched[key].astype(object)
                batched[key][i] = value
            batched["_" + key][i] = True
    return batched
