"""rl/envs/remote: the codec's exact round trips, and the env server under hostile input.

Servers run in this process (``serve.start_server`` on a free port) so that tests can
look at their session tables; the servers of sections 4 and 5 make a small probe env
of ours instead of Gymnasium's (their ``EnvService.make_env`` is swapped right after
start, before any Make), so nothing is registered globally. The command line is
tested on real ``python -m rl.envs.remote.serve`` processes.
"""

import json
import math
import os
import queue
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from polling import wait_for

grpc = pytest.importorskip("grpc", reason="needs the remote extra (grpcio)")
health_pb2 = pytest.importorskip("grpc_health.v1.health_pb2")
health_pb2_grpc = pytest.importorskip("grpc_health.v1.health_pb2_grpc")

from rl.envs.remote import client, codec, env_pb2, env_pb2_grpc, serve  # noqa: E402
from rl.envs.remote.address import TOKEN_VARIABLE  # noqa: E402
from rl.errors import EnvServerError  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVED = ["CartPole-v1", "Pendulum-v1"]
SERVICE = "/rl.envs.remote.EnvService/"
TIMEOUT = 10.0  # per call: a hung server fails the test instead of hanging it
FUZZ = settings(max_examples=120, deadline=None, database=None)
Code = grpc.StatusCode


# --- helpers ---------------------------------------------------------------------------
def refusal(method, request, **kwargs) -> grpc.RpcError:
    """The error a call ends with (it must end with one)."""
    kwargs.setdefault("timeout", TIMEOUT)
    with pytest.raises(grpc.RpcError) as caught:
        method(request, **kwargs)
    return caught.value


def assert_refused(method, request, code, *phrases, **kwargs) -> str:
    """The call ends with ``code`` and a message holding every phrase; returns the message."""
    error = refusal(method, request, **kwargs)
    details = error.details() or ""
    assert error.code() == code, f"{error.code()}: {details}"
    for phrase in phrases:
        assert phrase in details, f"{phrase!r} not in {details!r}"
    return details


def tensor_value(array) -> env_pb2.Value:
    return env_pb2.Value(tensor=codec.encode_tensor(np.asarray(array)))


def step_request(session_id, actions, seq=0) -> env_pb2.StepRequest:
    value = actions if isinstance(actions, env_pb2.Value) else codec.encode_value(actions)
    return env_pb2.StepRequest(session_id=session_id, actions=value, seq=seq)


class Twin:
    """A served session beside ``num_envs`` local ``gymnasium.make`` copies seeded seed + i,
    stepped with the same actions (autoreset as Gymnasium's SAME_STEP)."""

    def __init__(self, stub, env_id="CartPole-v1", num_envs=3, seed=0, autoreset=True):
        self.stub = stub
        self.autoreset = autoreset
        made = stub.Make(
            env_pb2.MakeRequest(env_id=env_id, num_envs=num_envs, seed=seed, autoreset=autoreset),
            timeout=TIMEOUT,
        )
        self.id = made.session_id
        self.made = made
        self.local = [gym.make(env_id) for _ in range(num_envs)]
        self.seq = 0
        self.endings = 0  # steps where some copy ended
        self.partial_endings = 0  # steps where some, not all, copies ended
        response = stub.Reset(env_pb2.ResetRequest(session_id=self.id), timeout=TIMEOUT)
        expected = np.stack([env.reset(seed=seed + i)[0] for i, env in enumerate(self.local)])
        assert_same_array(codec.decode_value(response.observations), expected)

    def step(self, actions) -> env_pb2.StepResponse:
        """Steps both sides and asserts they agree exactly."""
        self.seq += 1
        response = self.stub.Step(step_request(self.id, actions, self.seq), timeout=TIMEOUT)
        assert response.seq == self.seq  # echoed
        observations, finals, rewards, terminated, truncated = [], {}, [], [], []
        for i, env in enumerate(self.local):
            obs, reward, term, trunc, _ = env.step(actions[i].item())
            if self.autoreset and (term or trunc):
                finals[i] = obs
                obs, _ = env.reset()
            observations.append(obs)
            rewards.append(reward)
            terminated.append(term)
            truncated.append(trunc)
        assert_same_array(codec.decode_value(response.observations), np.stack(observations))
        assert_same_array(codec.decode_tensor(response.rewards), np.array(rewards, np.float64))
        assert_same_array(codec.decode_tensor(response.terminated), np.array(terminated))
        assert_same_array(codec.decode_tensor(response.truncated), np.array(truncated))
        if finals:
            expected = np.stack([finals.get(i, obs) for i, obs in enumerate(observations)])
            assert_same_array(codec.decode_value(response.final_observations), expected)
            self.endings += 1
            self.partial_endings += len(finals) < len(self.local)
        else:
            assert not response.HasField("final_observations")
        return response

    def close(self):
        self.stub.Close(env_pb2.CloseRequest(session_id=self.id), timeout=TIMEOUT)


def assert_same_array(actual, expected):
    """Same dtype, shape and bytes (NaN payloads and -0.0 included)."""
    expected = np.asarray(expected)
    assert isinstance(actual, np.ndarray), type(actual)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    assert actual.tobytes() == expected.tobytes(), (actual, expected)


def assert_same_tree(actual, expected):
    if isinstance(expected, dict):
        assert isinstance(actual, dict) and list(actual) == list(expected)
        for key in expected:
            assert_same_tree(actual[key], expected[key])
    elif isinstance(expected, tuple):
        assert isinstance(actual, tuple) and len(actual) == len(expected)
        for a, e in zip(actual, expected):
            assert_same_tree(a, e)
    else:
        assert_same_array(actual, expected)


def assert_same_space(actual: gym.Space, expected: gym.Space):
    """Equal spaces, down to each bound's bytes and each Dict's key order."""
    assert type(actual) is type(expected)
    assert actual == expected
    if isinstance(expected, gym.spaces.Box):
        assert_same_array(actual.low, expected.low)
        assert_same_array(actual.high, expected.high)
    elif isinstance(expected, gym.spaces.MultiDiscrete):
        assert_same_array(actual.nvec, expected.nvec)
        assert_same_array(actual.start, expected.start)
    elif isinstance(expected, gym.spaces.Discrete):
        assert (int(actual.n), int(actual.start)) == (int(expected.n), int(expected.start))
    elif isinstance(expected, gym.spaces.MultiBinary):
        assert actual.shape == expected.shape
    elif isinstance(expected, gym.spaces.Tuple):
        for a, e in zip(actual.spaces, expected.spaces):
            assert_same_space(a, e)
    elif isinstance(expected, gym.spaces.Dict):
        assert list(actual.spaces) == list(expected.spaces)
        for key in expected.spaces:
            assert_same_space(actual.spaces[key], expected.spaces[key])


def nested_tuples(depth: int) -> env_pb2.Value:
    """A tensor under ``depth`` levels of tuples (the tensor sits at depth ``depth``)."""
    value = tensor_value(np.zeros(1, np.float32))
    for _ in range(depth):
        value = env_pb2.Value(tuple=env_pb2.ValueList(items=[value]))
    return value


def halt(server):
    """Stops an in-process server without waiting on calls grpc never finishes (see
    test_cli_stops_on_sigterm_after_undecodable_stream_requests)."""
    server.stop(0).wait(5)


# --- a probe env and the servers that make it -------------------------------------------
class Gate:
    """Holds a probe's step until released; says when a step is waiting at it."""

    def __init__(self):
        self.entered = threading.Event()
        self.released = threading.Event()


class Probe(gym.Env):
    """Observation: [steps taken this episode]; reward: the action. Raises on step
    ``raise_at`` and waits at ``gate`` on step ``block_at`` (counted per episode)."""

    observation_space = gym.spaces.Box(0.0, 1000.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, gate=None, raise_at=0, block_at=0):
        self.gate = gate
        self.raise_at = raise_at
        self.block_at = block_at
        self.t = 0
        self.steps = 0  # over all episodes
        self.closed = False
        self.closed_during_step = False

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0], np.float32), {}

    def step(self, action):
        self.t += 1
        self.steps += 1
        if self.t == self.block_at:
            self.gate.entered.set()
            self.gate.released.wait(30)
            self.closed_during_step = self.closed
        if self.t == self.raise_at:
            raise RuntimeError(f"probe broke at step {self.t}")
        return np.array([self.t], np.float32), float(action), False, False, {}

    def close(self):
        self.closed = True


class Closing(gym.Wrapper):
    """Gymnasium's env, noting that it was closed."""

    def close(self):
        self.closed = True
        super().close()


class ProbeServer:
    """An in-process server whose sessions are Probes ("Probe", kwargs: gate name,
    raise_at, block_at) or recorded CartPoles ("CartPole-v1")."""

    def __init__(self, limits=serve.Limits(), **kwargs):
        self.server, self.port, self.service = serve.start_server([], limits=limits, **kwargs)
        self.service.make_env = self.make_env
        self.gates = {}
        self.made = []
        self.channel = grpc.insecure_channel(f"127.0.0.1:{self.port}")
        self.stub = env_pb2_grpc.EnvServiceStub(self.channel)

    def make_env(self, env_id, render_mode, kwargs):
        if env_id == "Probe":
            gate = kwargs.pop("gate", None)
            env = Probe(self.gates.get(gate), **kwargs)
        elif env_id == "CartPole-v1":
            env = Closing(gym.make(env_id, render_mode=render_mode))
            env.closed = False
        else:
            raise serve.Refusal(Code.NOT_FOUND, f"no env {env_id!r} here: Probe, CartPole-v1")
        self.made.append(env)
        return env

    def gate(self, name) -> Gate:
        self.gates[name] = Gate()
        return self.gates[name]

    def session(self, env_id="Probe", num_envs=1, reset=True, **kwargs) -> str:
        made = self.stub.Make(
            env_pb2.MakeRequest(
                env_id=env_id, num_envs=num_envs, kwargs_json=json.dumps(kwargs) if kwargs else ""
            ),
            timeout=TIMEOUT,
        )
        if reset:
            self.stub.Reset(env_pb2.ResetRequest(session_id=made.session_id), timeout=TIMEOUT)
        return made.session_id

    def stop(self):
        for gate in self.gates.values():
            gate.released.set()  # no server thread stays parked in a probe
        self.channel.close()
        halt(self.server)


def probe_obs(response) -> list:
    return codec.decode_value(response.observations)[:, 0].tolist()


# --- fixtures -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def served():
    server, port, service = serve.start_server(SERVED)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    yield env_pb2_grpc.EnvServiceStub(channel), service, channel
    channel.close()
    halt(server)


@pytest.fixture(scope="module")
def stub(served):
    return served[0]


@pytest.fixture(scope="module")
def probes():
    server = ProbeServer()
    yield server
    server.stop()


@pytest.fixture
def small():
    """A server with small limits; each test closes what it opened."""
    limits = serve.Limits(
        max_sessions=2, max_envs_per_session=4, max_total_envs=5, max_message_bytes=4096
    )
    server, port, service = serve.start_server(SERVED, limits=limits)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    yield env_pb2_grpc.EnvServiceStub(channel), service
    channel.close()
    halt(server)


@pytest.fixture
def twins(stub):
    opened = []

    def open_twin(**kwargs) -> Twin:
        opened.append(Twin(stub, **kwargs))
        return opened[-1]

    yield open_twin
    for twin in opened:
        twin.close()


# === 1. the codec ======================================================================
@pytest.mark.unit
@FUZZ
@given(
    array=hnp.arrays(
        dtype=st.sampled_from(sorted(codec.DTYPES)),
        shape=hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4),
    ),
    big_endian=st.booleans(),
)
def test_tensors_round_trip_exactly(array, big_endian):
    sent = array.astype(array.dtype.newbyteorder(">")) if big_endian else array
    message = codec.encode_tensor(sent)
    assert message.dtype == array.dtype.name
    assert list(message.shape) == list(array.shape)
    assert message.data == array.astype(array.dtype.newbyteorder("<")).tobytes()
    decoded = codec.decode_tensor(env_pb2.Tensor.FromString(message.SerializeToString()))
    assert_same_array(decoded, array)
    assert decoded.flags.writeable


@pytest.mark.unit
def test_tensor_wire_format_is_little_endian_bytes():
    message = codec.encode_tensor(np.array([1, -2], np.int16))
    assert (message.dtype, list(message.shape), message.data) == ("int16", [2], b"\x01\x00\xfe\xff")
    scalar = codec.encode_tensor(np.float64(1.5))
    assert (scalar.dtype, list(scalar.shape), scalar.data) == (
        "float64",
        [],
        struct.pack("<d", 1.5),
    )
    assert codec.decode_tensor(scalar).shape == ()
    empty = codec.encode_tensor(np.zeros((3, 0, 2), np.uint8))
    assert (list(empty.shape), empty.data) == ([3, 0, 2], b"")
    assert_same_array(codec.decode_tensor(empty), np.zeros((3, 0, 2), np.uint8))


@pytest.mark.unit
def test_value_trees_round_trip_with_their_structure():
    tree = {
        "pos": np.arange(6, dtype=np.float32).reshape(3, 2),
        "parts": (np.array([1, 0, 1], np.int64), {"flag": np.array([True, False, True])}),
        "nothing": np.zeros((3, 0), np.float64),
    }
    decoded = codec.decode_value(
        env_pb2.Value.FromString(codec.encode_value(tree).SerializeToString())
    )
    assert_same_tree(decoded, tree)
    # A flat list of numbers is one tensor, not a tuple of scalars.
    assert_same_array(codec.decode_value(codec.encode_value([1, 2, 3])), np.array([1, 2, 3]))


@pytest.mark.unit
def test_an_empty_tuple_round_trips_as_a_tuple():
    # gym.spaces.Tuple(()) is a valid space; its samples are ().
    space = gym.spaces.Dict({"none": gym.spaces.Tuple(()), "x": gym.spaces.Discrete(2)})
    sample = {"none": (), "x": np.array([0, 1])}
    decoded = codec.decode_value(codec.encode_value(sample))
    assert_same_tree(decoded, sample)
    assert codec.mismatch(space, decoded, batch=2) == ""


SPACES = {
    "box": gym.spaces.Box(-1.0, 2.0, (3,), np.float32),
    "box_unbounded": gym.spaces.Box(-np.inf, np.inf, (2, 2), np.float64),
    "box_half_bounded": gym.spaces.Box(
        np.array([-1.0, -np.inf], np.float32), np.array([np.inf, 0.5], np.float32)
    ),
    "box_uint8_image": gym.spaces.Box(0, 255, (4, 5, 3), np.uint8),
    "box_int64": gym.spaces.Box(-7, 9, (2,), np.int64),
    "box_scalar": gym.spaces.Box(-1.0, 1.0, (), np.float16),
    "discrete": gym.spaces.Discrete(3),
    "discrete_start": gym.spaces.Discrete(5, start=-2),
    "multi_discrete_start": gym.spaces.MultiDiscrete([3, 4], start=[-1, 2]),
    "multi_discrete_2d": gym.spaces.MultiDiscrete(np.array([[2, 3], [4, 5]])),
    "multi_binary": gym.spaces.MultiBinary(4),
    "multi_binary_2d": gym.spaces.MultiBinary([2, 3]),
    "tuple": gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Box(0.0, 1.0, (2,)))),
    "dict": gym.spaces.Dict(
        {"id": gym.spaces.Discrete(4), "pos": gym.spaces.Box(-1.0, 1.0, (2,), np.float32)}
    ),
    "nested": gym.spaces.Dict(
        {
            "inner": gym.spaces.Tuple(
                (
                    gym.spaces.MultiBinary([2, 2]),
                    gym.spaces.Dict({"x": gym.spaces.Discrete(2, start=1)}),
                )
            ),
            "outer": gym.spaces.MultiDiscrete([2, 2]),
        }
    ),
}


@pytest.mark.unit
@pytest.mark.parametrize("name", sorted(SPACES))
def test_spaces_round_trip_to_equal_spaces(name):
    space = SPACES[name]
    message = env_pb2.Space.FromString(codec.encode_space(space).SerializeToString())
    decoded = codec.decode_space(message)
    assert_same_space(decoded, space)
    # A sample of the space crosses the wire, batched, as a Value the space accepts.
    sample = gym.vector.utils.batch_space(space, 2).sample()
    assert codec.mismatch(decoded, codec.decode_value(codec.encode_value(sample)), batch=2) == ""


@pytest.mark.unit
@pytest.mark.parametrize(
    "space",
    [
        gym.spaces.Text(5),
        gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Text(3))),
        gym.spaces.Dict({"seq": gym.spaces.Sequence(gym.spaces.Discrete(2))}),
    ],
    ids=["text", "text_in_tuple", "sequence_in_dict"],
)
def test_unsupported_spaces_are_refused_by_name(space):
    with pytest.raises(codec.CodecError, match="spaces cannot be served: valid: Box"):
        codec.encode_space(space)


@pytest.mark.unit
@pytest.mark.parametrize(
    "tensor,phrase",
    [
        (env_pb2.Tensor(dtype="float32", shape=[2], data=b"\0" * 7), "needs 8 bytes, got 7"),
        (env_pb2.Tensor(dtype="int64", shape=[], data=b""), "needs 8 bytes, got 0"),
        (env_pb2.Tensor(dtype="object", shape=[1], data=b"\0" * 8), "unknown tensor dtype"),
        (env_pb2.Tensor(dtype="", shape=[], data=b""), "unknown tensor dtype"),
        (env_pb2.Tensor(dtype=">f4", shape=[1], data=b"\0" * 4), "unknown tensor dtype"),
        (env_pb2.Tensor(dtype="uint8", shape=[-1], data=b""), "invalid tensor shape"),
        (env_pb2.Tensor(dtype="uint8", shape=[2, -2], data=b"\0" * 4), "invalid tensor shape"),
        (env_pb2.Tensor(dtype="uint8", shape=[1] * 40, data=b"\0"), "invalid tensor shape"),
        # Zero elements, but more than any array can address: still a shape to refuse.
        (env_pb2.Tensor(dtype="float32", shape=[0, 2**62, 2**62], data=b""), "tensor"),
    ],
    ids=[
        "short",
        "scalar_without_data",
        "object",
        "no_dtype",
        "big_endian_name",
        "negative",
        "negative_inner",
        "rank_40",
        "zero_size_huge",
    ],
)
def test_decode_refuses_tensors_that_are_not_what_they_claim(tensor, phrase):
    with pytest.raises(codec.CodecError, match=re.escape(phrase)):
        codec.decode_tensor(tensor)


@pytest.mark.unit
def test_decode_refuses_malformed_values():
    one = tensor_value(np.zeros(1, np.float32))
    with pytest.raises(codec.CodecError, match="as many values as keys"):
        codec.decode_value(env_pb2.Value(dict=env_pb2.ValueDict(keys=["a", "b"], values=[one])))
    with pytest.raises(codec.CodecError, match="as many values as keys"):
        codec.decode_value(env_pb2.Value(dict=env_pb2.ValueDict(keys=[], values=[one])))
    with pytest.raises(codec.CodecError, match="repeated key"):
        codec.decode_value(
            env_pb2.Value(dict=env_pb2.ValueDict(keys=["a", "a"], values=[one, one]))
        )
    with pytest.raises(codec.CodecError, match="empty value"):
        codec.decode_value(env_pb2.Value())
    with pytest.raises(codec.CodecError, match="empty value"):
        codec.decode_value(env_pb2.Value(tuple=env_pb2.ValueList(items=[one, env_pb2.Value()])))


@pytest.mark.unit
def test_nesting_is_limited_where_the_deepest_space_ends():
    deepest = gym.spaces.Discrete(2)
    for _ in range(codec.MAX_DEPTH):
        deepest = gym.spaces.Tuple((deepest,))
    assert_same_space(codec.decode_space(codec.encode_space(deepest)), deepest)
    assert codec.decode_value(nested_tuples(codec.MAX_DEPTH)) is not None
    with pytest.raises(codec.CodecError, match="nested deeper"):
        codec.decode_value(nested_tuples(codec.MAX_DEPTH + 1))
    with pytest.raises(codec.CodecError, match="nested deeper"):
        codec.decode_value(nested_tuples(40))
    with pytest.raises(codec.CodecError, match="nested deeper"):
        codec.encode_space(gym.spaces.Tuple((deepest,)))


@pytest.mark.unit
def test_decode_refuses_malformed_spaces():
    box = codec.encode_space(gym.spaces.Box(0.0, 1.0, (2,)))
    with pytest.raises(codec.CodecError, match="as many spaces as keys"):
        codec.decode_space(env_pb2.Space(dict=env_pb2.DictSpace(keys=["a"], spaces=[box, box])))
    with pytest.raises(codec.CodecError, match="invalid discrete space"):
        codec.decode_space(env_pb2.Space(discrete=env_pb2.DiscreteSpace(n=0)))
    with pytest.raises(codec.CodecError, match="empty space"):
        codec.decode_space(env_pb2.Space())


@pytest.mark.unit
def test_infos_travel_as_json_with_arrays():
    text = codec.encode_info({"lives": np.int64(3), "pos": np.array([0.5, -1.0]), "name": "a"})
    info = codec.decode_info(text)
    assert info["lives"] == 3 and info["name"] == "a"
    assert_same_array(info["pos"], np.array([0.5, -1.0]))
    assert codec.encode_info({}) == "" and codec.decode_info("") == {}
    with pytest.raises(codec.CodecError, match="JSON object"):
        codec.decode_info("[1]")


# === 2. the protocol through a raw stub =================================================
@pytest.mark.unit
def test_steps_match_local_copies_with_same_step_autoreset(twins):
    twin = twins(num_envs=3, seed=7)
    assert twin.made.max_episode_steps == 500
    assert_same_space(
        codec.decode_space(twin.made.observation_space), twin.local[0].observation_space
    )
    assert_same_space(codec.decode_space(twin.made.action_space), gym.spaces.Discrete(2))
    rng = np.random.default_rng(0)
    for _ in range(80):  # pushing right 80% of the time ends episodes every ~15 steps
        twin.step((rng.random(3) < 0.8).astype(np.int64))
    assert twin.endings >= 3 and twin.partial_endings >= 1, (twin.endings, twin.partial_endings)


@pytest.mark.unit
def test_without_autoreset_an_ended_copy_needs_reset(stub, twins):
    twin = twins(num_envs=3, seed=3, autoreset=False)
    right = np.ones(3, np.int64)
    for _ in range(60):
        response = twin.step(right)
        ended = codec.decode_tensor(response.terminated) | codec.decode_tensor(response.truncated)
        if ended.any():
            break
    assert ended.any(), "pushing right for 60 steps ends a CartPole episode"
    assert not response.HasField("final_observations")
    assert_refused(
        stub.Step,
        step_request(twin.id, right, twin.seq + 1),
        Code.FAILED_PRECONDITION,
        f"env copies {np.flatnonzero(ended).tolist()} ended: call Reset",
    )
    reset = stub.Reset(env_pb2.ResetRequest(session_id=twin.id, seed=11), timeout=TIMEOUT)
    expected = np.stack([env.reset(seed=11 + i)[0] for i, env in enumerate(twin.local)])
    assert_same_array(codec.decode_value(reset.observations), expected)
    twin.step(np.array([0, 1, 0]))  # the refused seq is free again: nothing was stepped


@pytest.mark.unit
def test_step_before_reset_is_a_failed_precondition(stub):
    made = stub.Make(env_pb2.MakeRequest(env_id="CartPole-v1", num_envs=2), timeout=TIMEOUT)
    try:
        assert_refused(
            stub.Step,
            step_request(made.session_id, np.zeros(2, np.int64), 1),
            Code.FAILED_PRECONDITION,
            "needs Reset",
        )
    finally:
        stub.Close(env_pb2.CloseRequest(session_id=made.session_id), timeout=TIMEOUT)


@pytest.mark.unit
def test_a_resent_seq_gets_the_same_response_without_stepping(stub, twins):
    twin = twins(num_envs=2, seed=5)
    twin.step(np.array([1, 0]))
    second = twin.step(np.array([0, 0]))
    # The retry may even carry other actions: it is answered, not stepped.
    again = stub.Step(step_request(twin.id, np.array([1, 1]), twin.seq), timeout=TIMEOUT)
    assert again.SerializeToString() == second.SerializeToString()
    twin.step(np.array([1, 1]))  # continues from the second step, not from a repeat of it
    assert_refused(
        stub.Step,
        step_request(twin.id, np.array([0, 0]), twin.seq + 2),
        Code.FAILED_PRECONDITION,
        f"step seq {twin.seq + 2} is out of order: the last step was {twin.seq}",
    )
    assert_refused(
        stub.Step,
        step_request(twin.id, np.array([0, 0]), 1),
        Code.FAILED_PRECONDITION,
        "out of order",
    )
    twin.step(np.array([0, 1]))  # the refusals took nothing


@pytest.mark.unit
def test_a_resent_seq_is_not_answered_with_a_later_unnumbered_step(stub, twins):
    twin = twins(num_envs=1, seed=2)
    numbered = twin.step(np.array([1]))
    stub.Step(step_request(twin.id, np.array([0]), 0), timeout=TIMEOUT)  # seq 0: no seq
    try:
        again = stub.Step(step_request(twin.id, np.array([1]), twin.seq), timeout=TIMEOUT)
    except grpc.RpcError as e:
        assert e.code() == Code.FAILED_PRECONDITION, e.details()
    else:
        assert again.SerializeToString() == numbered.SerializeToString(), (
            "the retry of seq 1 was answered with the response of the unnumbered step after it"
        )


# === 3. statuses for bad requests ========================================================
@pytest.mark.unit
@pytest.mark.parametrize("method", ["Reset", "Step", "Render", "Close"])
def test_an_unknown_session_is_not_found(stub, method):
    request = {
        "Reset": env_pb2.ResetRequest,
        "Step": env_pb2.StepRequest,
        "Render": env_pb2.RenderRequest,
        "Close": env_pb2.CloseRequest,
    }[method](session_id="7-feedface")
    assert_refused(getattr(stub, method), request, Code.NOT_FOUND, "no session '7-feedface'")


@pytest.mark.unit
def test_an_env_not_served_is_not_found_naming_what_is(stub):
    assert_refused(
        stub.Make,
        env_pb2.MakeRequest(env_id="Acrobot-v1", num_envs=1),
        Code.NOT_FOUND,
        "does not serve 'Acrobot-v1'",
        "it serves CartPole-v1, Pendulum-v1",
    )


@pytest.mark.unit
@pytest.mark.parametrize(
    "request_fields,phrases",
    [
        ({"num_envs": 0}, ["num_envs must be at least 1, got 0"]),
        ({"num_envs": -3}, ["num_envs must be at least 1, got -3"]),
        ({"kwargs_json": "{not json"}, ["kwargs_json is not JSON"]),
        ({"kwargs_json": "[1, 2]"}, ["kwargs_json must be a JSON object, got list"]),
        ({"kwargs_json": '"text"'}, ["kwargs_json must be a JSON object, got str"]),
        ({"kwargs_json": '{"no_such_kwarg": 1}'}, ["could not be made", "no_such_kwarg"]),
        ({"kwargs_json": '{"render_mode": "human"}'}, ["could not be made", "render_mode"]),
        ({"render_mode": "human"}, ["render_mode 'human'", "rgb_array"]),
        # Was INTERNAL (RecursionError) from the JSON parser.
        ({"kwargs_json": "[" * 100_000}, ["kwargs_json: JSON nested deeper than 32 levels"]),
        (
            {"kwargs_json": '{"a": ' + "[" * 40 + "]" * 40 + "}"},
            ["kwargs_json: JSON nested deeper than 32 levels"],
        ),
        (
            {"kwargs_json": '{"sutton_barto_reward": "maybe"}'},
            ["could not be made", "'sutton_barto_reward' takes true or false, got 'maybe'"],
        ),
    ],
    ids=[
        "zero_envs",
        "negative_envs",
        "kwargs_not_json",
        "kwargs_list",
        "kwargs_string",
        "kwargs_unknown",
        "kwargs_render_mode",
        "render_mode",
        "kwargs_too_deep_for_the_parser",
        "kwargs_nested_deeply",
        "kwargs_bool_as_text",
    ],
)
def test_bad_make_requests_are_invalid_arguments(served, request_fields, phrases):
    stub, service, _ = served
    before = len(service.sessions)
    fields = {"env_id": "CartPole-v1", "num_envs": 1, **request_fields}
    assert_refused(stub.Make, env_pb2.MakeRequest(**fields), Code.INVALID_ARGUMENT, *phrases)
    assert len(service.sessions) == before


@pytest.mark.unit
def test_a_time_limit_beyond_the_protocol_leaves_no_session_behind(served):
    # MakeResponse.max_episode_steps is an int32; gymnasium.make accepts any positive int.
    stub, service, _ = served
    before = len(service.sessions)
    request = env_pb2.MakeRequest(
        env_id="CartPole-v1", num_envs=1, kwargs_json='{"max_episode_steps": 3000000000}'
    )
    try:
        made = stub.Make(request, timeout=TIMEOUT)
    except grpc.RpcError as e:
        code, details = e.code(), e.details()
    else:  # a server that can say so (an int64 field) may serve it
        stub.Close(env_pb2.CloseRequest(session_id=made.session_id), timeout=TIMEOUT)
        return
    left = len(service.sessions) - before
    assert (code, left) == (Code.INVALID_ARGUMENT, 0), (
        f"{code}: {details}; {left} sessions left open"
    )


@pytest.fixture(scope="module")
def cartpole3(stub):
    """A reset CartPole session of 3 copies that only ever refuses (its state never moves)."""
    made = stub.Make(env_pb2.MakeRequest(env_id="CartPole-v1", num_envs=3, seed=0), timeout=TIMEOUT)
    stub.Reset(env_pb2.ResetRequest(session_id=made.session_id), timeout=TIMEOUT)
    yield made.session_id
    stub.Close(env_pb2.CloseRequest(session_id=made.session_id), timeout=TIMEOUT)


@pytest.fixture(scope="module")
def pendulum2(stub):
    made = stub.Make(env_pb2.MakeRequest(env_id="Pendulum-v1", num_envs=2, seed=0), timeout=TIMEOUT)
    stub.Reset(env_pb2.ResetRequest(session_id=made.session_id), timeout=TIMEOUT)
    yield made.session_id
    stub.Close(env_pb2.CloseRequest(session_id=made.session_id), timeout=TIMEOUT)


DISCRETE_ACTIONS = {
    "float": (tensor_value(np.array([0.0, 1.0, 0.0], np.float32)), "dtype float32", "integers"),
    "too_few": (tensor_value(np.array([0, 1], np.int64)), "shape [2], expected [3]"),
    "extra_axis": (tensor_value(np.zeros((3, 1), np.int64)), "shape [3, 1], expected [3]"),
    "scalar": (tensor_value(np.int64(1)), "shape [], expected [3]"),
    "too_high": (tensor_value(np.array([0, 2, 1], np.int64)), "(copy 1) is outside Discrete(2)"),
    "negative": (tensor_value(np.array([-1, 0, 0], np.int8)), "(copy 0) is outside Discrete(2)"),
    "uint64_wraps": (
        tensor_value(np.array([0, 0, 2**64 - 1], np.uint64)),
        "(copy 2) is outside Discrete(2)",
    ),
    "tuple": (codec.encode_value((np.zeros(3, np.int64),)), "actions must be a tensor"),
    "empty": (env_pb2.Value(), "empty value"),
    "object_dtype": (
        env_pb2.Value(tensor=env_pb2.Tensor(dtype="object", shape=[3], data=b"\0" * 24)),
        "unknown tensor dtype 'object'",
    ),
    "byte_count": (
        env_pb2.Value(tensor=env_pb2.Tensor(dtype="int64", shape=[3], data=b"\0" * 23)),
        "needs 24 bytes, got 23",
    ),
    "zero_size_huge": (
        env_pb2.Value(tensor=env_pb2.Tensor(dtype="int64", shape=[0, 2**62, 2**62], data=b"")),
        "tensor",
    ),
}


@pytest.mark.unit
@pytest.mark.parametrize("case", sorted(DISCRETE_ACTIONS))
def test_bad_discrete_actions_are_invalid_arguments(stub, cartpole3, case):
    actions, *phrases = DISCRETE_ACTIONS[case]
    assert_refused(stub.Step, step_request(cartpole3, actions, 1), Code.INVALID_ARGUMENT, *phrases)


BOX_ACTIONS = {
    "nan": (np.array([[np.nan], [0.0]], np.float32), "holds NaN or infinite values"),
    "inf": (np.array([[0.0], [-np.inf]], np.float64), "holds NaN or infinite values"),
    "too_high": (np.array([[0.0], [2.5]], np.float32), "(copy 1) is outside Box(-2.0, 2.0"),
    "too_low": (np.array([[-2.01], [0.0]], np.float64), "(copy 0) is outside Box(-2.0, 2.0"),
    "int_too_high": (np.array([[1], [3]], np.int64), "(copy 1) is outside"),
    "flat": (np.zeros(2, np.float32), "shape [2], expected [2, 1]"),
}


@pytest.mark.unit
@pytest.mark.parametrize("case", sorted(BOX_ACTIONS))
def test_bad_box_actions_are_invalid_arguments(stub, pendulum2, case):
    actions, phrase = BOX_ACTIONS[case]
    assert_refused(stub.Step, step_request(pendulum2, actions, 1), Code.INVALID_ARGUMENT, phrase)


@pytest.mark.unit
def test_a_refused_step_takes_nothing(stub, twins):
    twin = twins(num_envs=3, seed=21)
    twin.step(np.array([1, 0, 1]))
    for case in ("too_high", "float", "byte_count"):
        refusal(stub.Step, step_request(twin.id, DISCRETE_ACTIONS[case][0], twin.seq + 1))
    twin.step(np.array([0, 0, 1]))  # same seq as the refused ones; copies where they were


@pytest.mark.unit
def test_a_negative_seed_is_an_invalid_argument(stub):
    made = stub.Make(env_pb2.MakeRequest(env_id="CartPole-v1", num_envs=2), timeout=TIMEOUT)
    try:
        assert_refused(
            stub.Reset,
            env_pb2.ResetRequest(session_id=made.session_id, seed=-1),
            Code.INVALID_ARGUMENT,
            "seed",
        )
    finally:
        stub.Close(env_pb2.CloseRequest(session_id=made.session_id), timeout=TIMEOUT)


@pytest.mark.unit
def test_oversized_messages_are_resource_exhausted(small):
    stub, service = small
    made = stub.Make(env_pb2.MakeRequest(env_id="CartPole-v1", num_envs=1), timeout=TIMEOUT)
    try:
        stub.Reset(env_pb2.ResetRequest(session_id=made.session_id), timeout=TIMEOUT)
        big = tensor_value(np.zeros(8192, np.uint8))
        assert_refused(
            stub.Step, step_request(made.session_id, big, 1), Code.RESOURCE_EXHAUSTED, "4096"
        )
        assert_refused(
            stub.Make,
            env_pb2.MakeRequest(env_id="CartPole-v1", num_envs=1, kwargs_json=" " * 5000),
            Code.RESOURCE_EXHAUSTED,
            "4096",
        )
        assert len(service.sessions) == 1
        response = stub.Step(step_request(made.session_id, np.array([1]), 1), timeout=TIMEOUT)
        assert codec.decode_value(response.observations).shape == (1, 4)
    finally:
        stub.Close(env_pb2.CloseRequest(session_id=made.session_id), timeout=TIMEOUT)


@pytest.mark.unit
def test_session_and_env_limits_are_resource_exhausted(small):
    stub, service = small  # max_sessions 2, max_envs_per_session 4, max_total_envs 5

    def make(num_envs):
        return stub.Make(
            env_pb2.MakeRequest(env_id="CartPole-v1", num_envs=num_envs), timeout=TIMEOUT
        )

    def close(made):
        stub.Close(env_pb2.CloseRequest(session_id=made.session_id), timeout=TIMEOUT)

    assert_refused(
        stub.Make,
        env_pb2.MakeRequest(env_id="CartPole-v1", num_envs=5),
        Code.RESOURCE_EXHAUSTED,
        "num_envs 5 is over this server's limit of 4 per session",
    )
    assert_refused(
        stub.Make,
        env_pb2.MakeRequest(env_id="CartPole-v1", num_envs=2**31 - 1),
        Code.RESOURCE_EXHAUSTED,
        "limit of 4 per session",
    )
    first = make(3)
    assert_refused(
        stub.Make,
        env_pb2.MakeRequest(env_id="CartPole-v1", num_envs=3),
        Code.RESOURCE_EXHAUSTED,
        "3 more envs would put this server over its limit of 5 (3 in use)",
    )
    second = make(2)
    assert_refused(
        stub.Make,
        env_pb2.MakeRequest(env_id="CartPole-v1", num_envs=1),
        Code.RESOURCE_EXHAUSTED,
        "limit of 2 sessions",
    )
    close(first)
    third = make(3)  # closing gave its sessions and envs back
    assert len(service.sessions) == 2
    close(second)
    close(third)


def slow_makes(server: ProbeServer, name: str) -> tuple:
    """Makes ``server``'s envs wait at a gate ``name``; returns (the gate, the env ids of
    the makes that reached it)."""
    gate = server.gate(name)
    entered = []
    plain_make = server.make_env

    def slow_make(env_id, render_mode, kwargs):
        entered.append(env_id)
        gate.entered.set()
        gate.released.wait(30)
        return plain_make(env_id, render_mode, kwargs)

    server.service.make_env = slow_make
    return gate, entered


@pytest.mark.unit
def test_concurrent_makes_stay_within_the_session_limit():
    server = ProbeServer(limits=serve.Limits(max_sessions=1))
    gate, entered = slow_makes(server, "slow_make")
    try:
        request = env_pb2.MakeRequest(env_id="Probe", num_envs=1)
        first = server.stub.Make.future(request, timeout=TIMEOUT)
        assert gate.entered.wait(TIMEOUT)
        second = server.stub.Make.future(request, timeout=TIMEOUT)
        # The second is refused at once, or (wrongly) starts making its env too.
        wait_for(
            lambda: second.done() or len(entered) >= 2,
            "answer to the second Make, or a second env being made",
            timeout=TIMEOUT,
        )
        gate.released.set()
        first.result()
        try:
            second.result()
        except grpc.RpcError as e:
            assert e.code() == Code.RESOURCE_EXHAUSTED, f"{e.code()}: {e.details()}"
        sessions = len(server.service.sessions)
        assert sessions == 1, f"{sessions} sessions on a server whose max_sessions is 1"
    finally:
        server.stop()


@pytest.mark.unit
def test_a_make_whose_answer_the_client_gave_up_on_leaves_no_session():
    # Its deadline passed while the env was being made: nobody would ever close it.
    server = ProbeServer(limits=serve.Limits(max_sessions=1))
    gate, _ = slow_makes(server, "late")
    try:
        request = env_pb2.MakeRequest(env_id="Probe", num_envs=1, make_id="late")
        # A deadline long enough for the server to start making the env on a loaded
        # machine; it passes while the env waits at the gate.
        late = server.stub.Make.future(request, timeout=3)
        assert gate.entered.wait(TIMEOUT)
        assert late.exception(TIMEOUT).code() == Code.DEADLINE_EXCEEDED
        gate.released.set()
        wait_for(lambda: server.made and server.made[0].closed, "the env made for nobody closed")
        assert len(server.service.sessions) == 0
        # Its room is given back: the one session this server holds can be made.
        made = server.stub.Make(request, timeout=TIMEOUT)
        assert len(server.service.sessions) == 1 and made.session_id
    finally:
        server.stop()


@pytest.mark.unit
def test_a_retried_make_gets_the_session_the_first_made_and_waits_for_it_meanwhile():
    server = ProbeServer()
    gate, entered = slow_makes(server, "retried")
    try:
        request = env_pb2.MakeRequest(env_id="Probe", num_envs=1, make_id="retried")
        first = server.stub.Make.future(request, timeout=TIMEOUT)
        assert gate.entered.wait(TIMEOUT)
        # While the first is being made, the retry is told to try again (busy), by metadata.
        error = refusal(server.stub.Make, request)
        assert error.code() == Code.ABORTED and client.is_busy(error), error.details()
        assert codec.BUSY_METADATA in tuple(error.trailing_metadata())
        gate.released.set()
        made = first.result()
        again = server.stub.Make(request, timeout=TIMEOUT)
        assert again == made and entered == ["Probe"]  # one session, its answer again
        assert len(server.service.sessions) == 1
        other = env_pb2.MakeRequest(env_id="Probe", num_envs=1, make_id="another")
        assert server.stub.Make(other, timeout=TIMEOUT).session_id != made.session_id
    finally:
        server.stop()


@pytest.mark.unit
def test_the_client_retrying_a_late_make_ends_with_one_session(monkeypatch):
    # Its first Make times out while the env is being made; the retries carry the same id.
    monkeypatch.setattr(client, "MAKE_TIMEOUT_SECONDS", 0.3)
    monkeypatch.setenv(client.ANSWER_VARIABLE, "0.3")
    monkeypatch.setenv(client.RETRY_VARIABLE, "30")
    server = ProbeServer()
    gate, _ = slow_makes(server, "late")
    tries = []
    first_try = server.service._make_once

    def counted(request, context):
        tries.append(request.make_id)
        if len(tries) == 2:
            gate.released.set()  # the client gave up on the first: let it finish
        return first_try(request, context)

    server.service._make_once = counted
    envs = client.RemoteVectorEnv(f"grpc://127.0.0.1:{server.port}/Probe", 1, stream=False)
    try:
        assert len(tries) >= 2 and len(set(tries)) == 1
        assert len(server.service.sessions) == 1
        # What was made for a try the client had given up on is closed; the last is its.
        assert [env.closed for env in server.made] == [True] * (len(server.made) - 1) + [False]
        envs.reset(seed=0)
        assert envs.step(np.array([1]))[0].tolist() == [[1.0]]
    finally:
        envs.close()
        server.stop()


@pytest.mark.unit
def test_busy_is_said_by_trailing_metadata_not_by_the_words(probes, monkeypatch):
    monkeypatch.setattr(serve, "BUSY_WAIT_SECONDS", 0.2)
    gate = probes.gate("busy")
    slow = probes.session(gate="busy", block_at=1)
    taken = probes.stub.Step.future(step_request(slow, np.array([1]), 1), timeout=TIMEOUT)
    try:
        assert gate.entered.wait(TIMEOUT)
        error = refusal(probes.stub.Step, step_request(slow, np.array([1]), 1))
        assert error.code() == Code.ABORTED and client.is_busy(error), error.details()
    finally:
        gate.released.set()
    assert probe_obs(taken.result()) == [1.0]
    # An ABORTED without the metadata is an error, whatever it says; with it, a retry.
    retries = client.Retries(client.Connection("grpc://127.0.0.1:1/Probe"), "Step", 1.0)
    with pytest.raises(EnvServerError, match="ABORTED: session s is busy"):
        retries.after(Code.ABORTED, "session s is busy", busy=False)
    retries.after(Code.ABORTED, "any words", busy=True)  # waits its backoff, then returns
    retries.connection.close()


@pytest.mark.unit
def test_idle_sessions_expire_and_their_envs_close():
    server = ProbeServer(limits=serve.Limits(idle_timeout=0.3))
    try:
        session = server.session("CartPole-v1", num_envs=2)
        server.stub.Step(step_request(session, np.array([0, 1])), timeout=TIMEOUT)
        wait_for(lambda: not server.service.sessions, "expiry of the idle session", timeout=15)
        assert_refused(
            server.stub.Step,
            step_request(session, np.array([0, 1])),
            Code.NOT_FOUND,
            f"no session '{session}'",
            "expired after 0.3 s idle",
        )
        assert [env.closed for env in server.made] == [True, True]
    finally:
        server.stop()


@pytest.mark.unit
def test_a_session_in_a_long_call_is_not_idle():
    idle_timeout = 0.3
    server = ProbeServer(limits=serve.Limits(idle_timeout=idle_timeout))
    try:
        gate = server.gate("long")
        session = server.session(gate="long", block_at=1)
        sweeps = []  # when each of the server's expiry sweeps started
        plain_expire = server.service.sessions.expire_idle

        def timed_expire():
            started = time.monotonic()
            plain_expire()
            sweeps.append(started)

        server.service.sessions.expire_idle = timed_expire
        call = server.stub.Step.future(step_request(session, np.array([1]), 1), timeout=TIMEOUT)
        assert gate.entered.wait(TIMEOUT)
        in_call_since = time.monotonic()
        # Wait for a finished sweep that found the session idle for longer than the timeout,
        # had it not been in a call.
        wait_for(
            lambda: any(started > in_call_since + idle_timeout for started in sweeps),
            f"expiry sweep {idle_timeout} s into the call",
            timeout=TIMEOUT,
        )
        expired_mid_call = len(server.service.sessions) == 0
        gate.released.set()
        assert probe_obs(call.result()) == [1.0]
        probe = server.made[0]
        assert not probe.closed_during_step, "the env was closed while it was stepping"
        assert not expired_mid_call, "the session expired while a call was using it"
    finally:
        server.stop()


@pytest.mark.unit
def test_render_needs_rgb_array_and_returns_the_env_frame(stub):
    plain = stub.Make(env_pb2.MakeRequest(env_id="CartPole-v1", num_envs=1), timeout=TIMEOUT)
    drawn = stub.Make(
        env_pb2.MakeRequest(env_id="CartPole-v1", num_envs=2, seed=4, render_mode="rgb_array"),
        timeout=TIMEOUT,
    )
    try:
        stub.Reset(env_pb2.ResetRequest(session_id=plain.session_id), timeout=TIMEOUT)
        stub.Reset(env_pb2.ResetRequest(session_id=drawn.session_id), timeout=TIMEOUT)
        assert_refused(
            stub.Render,
            env_pb2.RenderRequest(session_id=plain.session_id),
            Code.FAILED_PRECONDITION,
            "render_mode 'rgb_array'",
        )
        frame = codec.decode_tensor(
            stub.Render(
                env_pb2.RenderRequest(session_id=drawn.session_id, index=1), timeout=TIMEOUT
            ).frame
        )
        local = gym.make("CartPole-v1", render_mode="rgb_array")
        local.reset(seed=4 + 1)
        expected = local.render()
        local.close()
        assert frame.dtype == np.uint8 and frame.shape == (400, 600, 3)
        assert_same_array(frame, expected)
        for index in (2, -1):
            assert_refused(
                stub.Render,
                env_pb2.RenderRequest(session_id=drawn.session_id, index=index),
                Code.INVALID_ARGUMENT,
                f"index {index} is not a copy: valid: 0..1",
            )
    finally:
        stub.Close(env_pb2.CloseRequest(session_id=plain.session_id), timeout=TIMEOUT)
        stub.Close(env_pb2.CloseRequest(session_id=drawn.session_id), timeout=TIMEOUT)


@pytest.mark.unit
def test_a_token_server_refuses_calls_without_it_but_answers_health_checks():
    server, port, _ = serve.start_server(SERVED, token="s3cret")
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        stub = env_pb2_grpc.EnvServiceStub(channel)
        request = env_pb2.MakeRequest(env_id="CartPole-v1", num_envs=1)
        for metadata in (
            None,
            (("authorization", "Bearer wrong"),),
            (("authorization", "s3cret"),),
        ):
            assert_refused(
                stub.Make, request, Code.UNAUTHENTICATED, "auth token", metadata=metadata
            )
        with pytest.raises(grpc.RpcError) as caught:
            list(stub.StepStream(iter([env_pb2.StepRequest(session_id="x")]), timeout=TIMEOUT))
        assert caught.value.code() == Code.UNAUTHENTICATED
        good = (("authorization", "Bearer s3cret"),)
        made = stub.Make(request, timeout=TIMEOUT, metadata=good)
        stub.Close(env_pb2.CloseRequest(session_id=made.session_id), timeout=TIMEOUT, metadata=good)
        health = health_pb2_grpc.HealthStub(channel)
        for service in ("", "rl.envs.remote.EnvService"):
            answer = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=TIMEOUT)
            assert answer.status == health_pb2.HealthCheckResponse.SERVING
    finally:
        channel.close()
        halt(server)


# === 4. an env that raises =============================================================
@pytest.mark.unit
def test_an_env_that_raises_is_reported_and_needs_reset(probes):
    stub = probes.stub
    broken = probes.session(num_envs=2, raise_at=3)
    other = probes.session(num_envs=1)
    one, two = np.array([1, 1]), np.array([1])
    assert probe_obs(stub.Step(step_request(broken, one, 1), timeout=TIMEOUT)) == [1.0, 1.0]
    assert probe_obs(stub.Step(step_request(broken, one, 2), timeout=TIMEOUT)) == [2.0, 2.0]
    assert probe_obs(stub.Step(step_request(other, two, 1), timeout=TIMEOUT)) == [1.0]
    assert_refused(
        stub.Step,
        step_request(broken, one, 3),
        Code.INTERNAL,
        "env Probe raised during step: RuntimeError: probe broke at step 3",
        "Reset",
    )
    assert probe_obs(stub.Step(step_request(other, two, 2), timeout=TIMEOUT)) == [2.0]
    assert_refused(stub.Step, step_request(broken, one, 3), Code.FAILED_PRECONDITION, "needs Reset")
    reset = stub.Reset(env_pb2.ResetRequest(session_id=broken), timeout=TIMEOUT)
    assert probe_obs(reset) == [0.0, 0.0]
    assert probe_obs(stub.Step(step_request(broken, one, 3), timeout=TIMEOUT)) == [1.0, 1.0]
    assert probe_obs(stub.Step(step_request(other, two, 3), timeout=TIMEOUT)) == [3.0]
    assert probes.session(num_envs=1)  # and the server still makes sessions


@pytest.mark.unit
def test_the_client_goes_on_after_reset_when_its_env_raised(probes, monkeypatch):
    from rl.envs.remote.client import RemoteEnv

    monkeypatch.delenv(TOKEN_VARIABLE, raising=False)
    env = RemoteEnv(f"grpc://127.0.0.1:{probes.port}/Probe?raise_at=2")
    try:
        env.reset()
        assert env.step(1)[0].tolist() == [1.0]
        with pytest.raises(EnvServerError, match="probe broke at step 2"):
            env.step(1)
        obs, _ = env.reset()
        assert obs.tolist() == [0.0]
        assert env.step(1)[0].tolist() == [1.0]
    finally:
        env.close()


# === 5. fuzzing and clients that vanish ==================================================
METHODS = {
    "Make": env_pb2.MakeResponse,
    "Reset": env_pb2.ResetResponse,
    "Step": env_pb2.StepResponse,
    "Render": env_pb2.RenderResponse,
    "Close": env_pb2.CloseResponse,
}


def assert_not_a_server_fault(error: grpc.RpcError):
    """A status, but not a hang and not the server's own "a bug of ours" INTERNAL."""
    assert error.code() != Code.DEADLINE_EXCEEDED, "the server did not answer in time"
    assert error.code() not in (Code.UNAVAILABLE, Code.UNKNOWN), error.details()
    assert not (error.details() or "").startswith("server error"), error.details()


@pytest.mark.unit
def test_random_bytes_to_every_method_get_a_status(served, twins):
    stub, _, channel = served
    sentinel = twins(num_envs=2, seed=100)
    rng = np.random.default_rng(1)
    for _ in range(3):
        sentinel.step(rng.integers(0, 2, 2))
    made = []

    @FUZZ
    @given(method=st.sampled_from(sorted(METHODS)), data=st.binary(max_size=200))
    def fuzz_unary(method, data):
        call = channel.unary_unary(
            SERVICE + method, request_serializer=None, response_deserializer=None
        )
        try:
            answer = call(data, timeout=TIMEOUT)
        except grpc.RpcError as e:
            assert_not_a_server_fault(e)
        else:
            response = METHODS[method].FromString(answer)
            if method == "Make":
                made.append(response.session_id)

    @settings(max_examples=40, deadline=None, database=None)
    @given(chunks=st.lists(st.binary(max_size=100), max_size=4))
    def fuzz_stream(chunks):
        call = channel.stream_stream(
            SERVICE + "StepStream", request_serializer=None, response_deserializer=None
        )
        try:
            for answer in call(iter(chunks), timeout=TIMEOUT):
                env_pb2.StepResponse.FromString(answer)
        except grpc.RpcError as e:
            assert_not_a_server_fault(e)

    fuzz_unary()
    fuzz_stream()
    for session_id in made:
        stub.Close(env_pb2.CloseRequest(session_id=session_id), timeout=TIMEOUT)
    for _ in range(3):
        sentinel.step(rng.integers(0, 2, 2))
    made = stub.Make(env_pb2.MakeRequest(env_id="Pendulum-v1", num_envs=1), timeout=TIMEOUT)
    stub.Close(env_pb2.CloseRequest(session_id=made.session_id), timeout=TIMEOUT)


DTYPE_NAMES = sorted(codec.DTYPES) + ["object", "", "float128", "<f4", "complex64", "U3"]


@st.composite
def tensors(draw):
    dtype = draw(st.sampled_from(DTYPE_NAMES))
    shape = draw(
        st.lists(st.one_of(st.integers(0, 3), st.sampled_from([-1, 2**40, 2**62])), max_size=4)
    )
    if dtype in codec.DTYPES and all(0 <= d <= 3 for d in shape) and draw(st.booleans()):
        size = math.prod(shape) * np.dtype(dtype).itemsize
        data = draw(st.binary(min_size=size, max_size=size))
    else:
        data = draw(st.binary(max_size=40))
    return env_pb2.Tensor(dtype=dtype, shape=shape, data=data)


VALUES = st.recursive(
    st.one_of(tensors().map(lambda t: env_pb2.Value(tensor=t)), st.just(env_pb2.Value())),
    lambda children: st.one_of(
        st.lists(children, max_size=3).map(
            lambda items: env_pb2.Value(tuple=env_pb2.ValueList(items=items))
        ),
        st.builds(
            lambda keys, values: env_pb2.Value(dict=env_pb2.ValueDict(keys=keys, values=values)),
            st.lists(st.sampled_from(["", "a", "b"]), max_size=3),
            st.lists(children, max_size=3),
        ),
    ),
    max_leaves=6,
)


@pytest.mark.unit
def test_wrong_step_requests_get_a_status_or_a_valid_step(served, twins):
    stub, _, _ = served
    sentinel = twins(num_envs=2, seed=200)
    target = twins(num_envs=2, seed=300)
    rng = np.random.default_rng(2)
    sentinel.step(rng.integers(0, 2, 2))
    valid = codec.encode_value(np.array([0, 1], np.int64))

    @FUZZ
    @given(
        session=st.sampled_from([target.id, "", "1-x", target.id + " "]),
        actions=st.one_of(VALUES, st.just(valid)),
        seq=st.one_of(st.integers(0, 6), st.just(2**64 - 1)),
        reset=st.booleans(),
    )
    def fuzz(session, actions, seq, reset):
        if reset:  # now and then, so that valid steps can happen
            stub.Reset(env_pb2.ResetRequest(session_id=target.id), timeout=TIMEOUT)
        try:
            response = stub.Step(
                env_pb2.StepRequest(session_id=session, actions=actions, seq=seq), timeout=TIMEOUT
            )
        except grpc.RpcError as e:
            assert_not_a_server_fault(e)
            assert e.code() in (Code.INVALID_ARGUMENT, Code.FAILED_PRECONDITION, Code.NOT_FOUND)
        else:
            assert codec.decode_value(response.observations).shape == (2, 4)
            assert codec.decode_tensor(response.rewards).shape == (2,)
            assert codec.decode_tensor(response.terminated).dtype == np.bool_

    fuzz()
    for _ in range(3):
        sentinel.step(rng.integers(0, 2, 2))


KWARGS = st.dictionaries(
    st.sampled_from(["max_episode_steps", "sutton_barto_reward", "g", "render_mode", "nope"]),
    st.one_of(st.integers(-3, 2**40), st.booleans(), st.none(), st.text(max_size=3)),
    max_size=2,
)


@pytest.mark.unit
def test_wrong_make_requests_get_a_status_or_a_session(served, twins):
    stub, service, _ = served
    sentinel = twins(num_envs=1, seed=400)
    before = len(service.sessions)

    @settings(max_examples=60, deadline=None, database=None)
    @given(
        env_id=st.one_of(
            st.sampled_from(SERVED + ["", "Acrobot-v1", "cartpole"]), st.text(max_size=8)
        ),
        num_envs=st.one_of(st.integers(-2, 3), st.just(2**31 - 1)),
        kwargs_json=st.one_of(KWARGS.map(json.dumps), st.text(max_size=8)),
        seed=st.one_of(st.none(), st.integers(0, 2**63 - 1)),
        render_mode=st.sampled_from(["", "rgb_array", "human", "rgb"]),
        autoreset=st.booleans(),
    )
    def fuzz(env_id, num_envs, kwargs_json, seed, render_mode, autoreset):
        request = env_pb2.MakeRequest(
            env_id=env_id,
            num_envs=num_envs,
            kwargs_json=kwargs_json,
            render_mode=render_mode,
            autoreset=autoreset,
        )
        if seed is not None:
            request.seed = seed
        try:
            made = stub.Make(request, timeout=TIMEOUT)
        except grpc.RpcError as e:
            assert_not_a_server_fault(e)
            assert e.code() in (Code.INVALID_ARGUMENT, Code.NOT_FOUND, Code.RESOURCE_EXHAUSTED)
        else:
            assert env_id in SERVED and 1 <= num_envs
            codec.decode_space(made.observation_space)
            stub.Close(env_pb2.CloseRequest(session_id=made.session_id), timeout=TIMEOUT)
        assert len(service.sessions) == before

    fuzz()
    sentinel.step(np.array([1]))


@pytest.mark.unit
def test_a_client_that_gives_up_mid_step_leaves_the_server_serving(probes):
    stub = probes.stub
    gate = probes.gate("deadline")
    slow = probes.session(gate="deadline", block_at=1)
    other = probes.session()
    assert_refused(
        stub.Step, step_request(slow, np.array([1]), 1), Code.DEADLINE_EXCEEDED, timeout=0.3
    )
    assert gate.entered.wait(TIMEOUT)  # the server took the step the client gave up on
    assert probe_obs(stub.Step(step_request(other, np.array([1]), 1), timeout=TIMEOUT)) == [1.0]
    gate.released.set()
    # Retrying the step that timed out gets its result; the env stepped once.
    assert probe_obs(stub.Step(step_request(slow, np.array([1]), 1), timeout=TIMEOUT)) == [1.0]
    assert probe_obs(stub.Step(step_request(slow, np.array([1]), 2), timeout=TIMEOUT)) == [2.0]
    slow_env = [env for env in probes.made if isinstance(env, Probe) and env.gate is gate][0]
    assert slow_env.steps == 2


def queued_stream(stub):
    """A StepStream fed from a queue (None ends it): (queue, response iterator)."""
    requests = queue.SimpleQueue()
    return requests, stub.StepStream(client.queued_requests(requests), timeout=60)


@pytest.mark.unit
def test_a_stream_cancelled_mid_step_leaves_the_server_serving(probes):
    stub = probes.stub
    gate = probes.gate("stream")
    slow = probes.session(gate="stream", block_at=2)
    other = probes.session()
    requests, responses = queued_stream(stub)
    try:
        requests.put(step_request(slow, np.array([1]), 1))
        assert probe_obs(next(responses)) == [1.0]
        requests.put(step_request(slow, np.array([1]), 2))
        assert gate.entered.wait(TIMEOUT)
        responses.cancel()
        assert probe_obs(stub.Step(step_request(other, np.array([1]), 1), timeout=TIMEOUT)) == [1.0]
    finally:
        requests.put(None)
        gate.released.set()
    assert probe_obs(stub.Step(step_request(slow, np.array([0]), 2), timeout=TIMEOUT)) == [2.0]
    assert probe_obs(stub.Step(step_request(slow, np.array([0]), 3), timeout=TIMEOUT)) == [3.0]


class Blackhole:
    """A TCP proxy to a local port that can vanish: it stops passing bytes either way but
    keeps both connections open, as a machine cut off the network leaves them (half-open)."""

    def __init__(self, target_port: int):
        self.target_port = target_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.cut = threading.Event()
        self.sockets = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                inside, _ = self.listener.accept()
            except OSError:  # closed
                return
            outside = socket.create_connection(("127.0.0.1", self.target_port))
            self.sockets += [inside, outside]
            for source, sink in ((inside, outside), (outside, inside)):
                threading.Thread(target=self._pass, args=(source, sink), daemon=True).start()

    def _pass(self, source, sink):
        while True:
            try:
                data = source.recv(65536)
                if not data or self.cut.is_set():
                    return  # what comes after the cut is lost
                sink.sendall(data)
            except OSError:
                return

    def vanish(self):
        self.cut.set()

    def close(self):
        self.listener.close()
        for sock in self.sockets:
            sock.close()


@pytest.mark.unit
def test_keepalive_pings_are_within_what_the_other_side_tolerates():
    # The client's pings come no faster than the server takes them, or it would be refused.
    options = dict(client.CHANNEL_OPTIONS)
    assert options["grpc.keepalive_time_ms"] >= serve.MIN_CLIENT_PING_SECONDS * 1000
    assert options["grpc.keepalive_timeout_ms"] < options["grpc.keepalive_time_ms"]
    assert options["grpc.http2.ping_timeout_ms"] == options["grpc.keepalive_timeout_ms"]
    assert options["grpc.http2.max_pings_without_data"] == 0  # pings during a long call too


@pytest.mark.unit
def test_the_server_frees_the_step_stream_of_a_client_that_vanished():
    server = ProbeServer(keepalive_seconds=1.0, keepalive_timeout_seconds=1.0)
    proxy = Blackhole(server.port)
    channel = grpc.insecure_channel(f"127.0.0.1:{proxy.port}")
    requests, responses = queued_stream(env_pb2_grpc.EnvServiceStub(channel))
    try:
        session = server.session()
        requests.put(step_request(session, np.array([1]), 1))
        assert probe_obs(next(responses)) == [1.0]
        assert server.service._open_streams == 1
        proxy.vanish()
        cut = time.monotonic()
        wait_for(lambda: server.service._open_streams == 0, "the stream freed", timeout=30)
        # 1 s silent, then 1 s for the ping's answer; the rest is a loaded machine's.
        assert time.monotonic() - cut < 10
    finally:
        requests.put(None)
        responses.cancel()
        channel.close()
        proxy.close()
        server.stop()


@pytest.mark.unit
def test_a_client_notices_a_vanished_server_by_keepalive_before_the_deadline(monkeypatch):
    # A Step's deadline (60 s here) would notice it too, much later.
    monkeypatch.setattr(client, "CHANNEL_OPTIONS", client.channel_options(1.0, 1.0))
    monkeypatch.setenv(client.ANSWER_VARIABLE, "60")
    monkeypatch.setenv(client.RETRY_VARIABLE, "0")
    server, port, _ = serve.start_server(SERVED)
    proxy = Blackhole(port)
    envs = client.RemoteVectorEnv(f"grpc://127.0.0.1:{proxy.port}/CartPole-v1", 1, stream=False)
    try:
        envs.reset(seed=0)
        proxy.vanish()
        cut = time.monotonic()
        with pytest.raises(EnvServerError, match="is unreachable"):
            envs.step(np.array([0]))
        assert time.monotonic() - cut < 10
    finally:
        envs.close()
        proxy.close()
        halt(server)


@pytest.mark.unit
def test_open_streams_waiting_for_steps_do_not_starve_other_clients():
    # An open StepStream holds a server thread between steps (RemoteVectorEnv streams by
    # default): streams beyond the server's cap are refused, and unary calls still go.
    server = ProbeServer(limits=serve.Limits(max_sessions=4))
    streams = []
    try:
        session = server.session()
        assert server.service.max_streams == 4  # max_sessions streams
        for _ in range(4):
            requests, responses = queued_stream(server.stub)
            streams.append((requests, responses))  # a dropped call is cancelled
            requests.put(step_request(session, np.array([1])))
            next(responses)  # open on the server, waiting for its next step
        requests, responses = queued_stream(server.stub)
        streams.append((requests, responses))  # a dropped call is cancelled
        requests.put(step_request(session, np.array([1])))
        with pytest.raises(grpc.RpcError) as caught:
            next(responses)
        assert caught.value.code() == Code.RESOURCE_EXHAUSTED
        assert "limit of 4 open step streams" in caught.value.details()
        made = server.stub.Make(env_pb2.MakeRequest(env_id="Probe", num_envs=1), timeout=3.0)
        reset = server.stub.Reset(env_pb2.ResetRequest(session_id=made.session_id), timeout=3.0)
        assert probe_obs(reset) == [0.0]
        health = health_pb2_grpc.HealthStub(server.channel)
        answer = health.Check(health_pb2.HealthCheckRequest(), timeout=3.0)
        assert answer.status == health_pb2.HealthCheckResponse.SERVING
        streams[0][0].put(None)  # a stream that ends gives its place back

        def a_new_stream_is_served():
            requests, responses = queued_stream(server.stub)
            streams.append((requests, responses))  # a dropped call is cancelled
            requests.put(step_request(session, np.array([1])))
            try:
                next(responses)
            except grpc.RpcError as e:
                assert e.code() == Code.RESOURCE_EXHAUSTED, f"{e.code()}: {e.details()}"
                return False
            return True

        wait_for(a_new_stream_is_served, "stream served after one ended", timeout=TIMEOUT)
    finally:
        for requests, _ in streams:
            requests.put(None)
        server.stop()


# === 6. the command line ===================================================================
def serve_command(*flags):
    return [sys.executable, "-m", "rl.envs.remote.serve", *flags]


def environment_without_token():
    return {k: v for k, v in os.environ.items() if k != TOKEN_VARIABLE}


def run_without_token(command):
    """Runs ``command`` from the repo root without the token variable; its output."""
    return subprocess.run(
        command,
        cwd=ROOT,
        env=environment_without_token(),
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.process
@pytest.mark.parametrize(
    "flags, variable, expected",
    [
        (["--token", "   "], None, "--token is blank"),
        (["--token", ""], None, "--token is blank"),
        (["--token", "a\nb"], None, "--token holds whitespace at its ends or characters other"),
        ([], "  ", f"${TOKEN_VARIABLE} is blank"),
    ],
)
def test_cli_refuses_a_blank_token_even_on_loopback(flags, variable, expected):
    # A blank token passed the check for non-loopback hosts and protected nothing.
    environ = {**environment_without_token(), **({TOKEN_VARIABLE: variable} if variable else {})}
    done = subprocess.run(
        serve_command("--env", "CartPole-v1", "--port", "0", "--host", "0.0.0.0", *flags),
        cwd=ROOT, env=environ, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], done.stderr
    assert done.stdout == ""


@pytest.mark.process
def test_cli_refuses_an_open_host_without_a_token():
    done = run_without_token(serve_command("--env", "CartPole-v1", "--host", "0.0.0.0"))
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "token" in lines[0] and "0.0.0.0" in lines[0], done.stderr
    assert done.stdout == ""


@pytest.mark.process
@pytest.mark.parametrize(
    "env_ids, expected",
    [
        ("CartPol-v1", ["unknown env 'CartPol-v1'", "'CartPole-v1'"]),
        # Keyword arguments belong in the client's URL, not in what the server serves.
        ("CartPole-v1?max_episode_steps=3", ["clients pass keyword arguments in their URL"]),
    ],
)
def test_cli_refuses_an_env_it_cannot_serve_in_one_line(env_ids, expected):
    done = run_without_token(serve_command("--env", env_ids, "--port", "0"))
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert all(text in lines[0] for text in expected), lines[0]


@pytest.mark.process
@pytest.mark.parametrize(
    "flags, expected",
    [
        (["--prot", "5"], "unrecognized arguments: --prot 5"),
        (["--port", "abc"], "argument --port: 'abc' is not an integer"),
        (["--port", "70000"], "argument --port: must be at most 65535, got 70000"),
        (
            ["--idle_timeout", "nan"],
            "argument --idle_timeout: must be a number in [0.1, 604800.0], got nan",
        ),
        (["--max_sessions", "0"], "argument --max_sessions: must be at least 1, got 0"),
        (["--threads", "1e9"], "argument --threads: '1e9' is not an integer"),
        (["--tls_cert", "{text}", "--tls_key", "{text}"], "holds no PEM certificate"),
    ],
)
def test_cli_refuses_bad_flags_in_one_line(tmp_path, flags, expected):
    text = tmp_path / "not.pem"
    text.write_text("not a certificate\n")
    flags = [str(text) if f == "{text}" else f for f in flags]
    done = run_without_token(serve_command("--env", "CartPole-v1", "--port", "0", *flags))
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], done.stderr
    assert done.stdout == ""


@pytest.mark.process
def test_cli_refuses_a_taken_port_without_a_traceback():
    process, port = serve.launch("CartPole-v1", env=environment_without_token())
    try:
        done = run_without_token(serve_command("--env", "CartPole-v1", "--port", str(port)))
    finally:
        process.terminate()
        process.wait(timeout=30)
    assert done.returncode == 2, done.stderr
    # gRPC's core logs the failed bind on a line of its own first.
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("python -m rl.envs.remote.serve: error: cannot bind 127.0.0.1:")
    assert "Traceback" not in done.stderr


# Run in a child: once main's handler is installed, a side thread sends SIGTERM to itself,
# as the kernel may when it picks one of grpc's threads for a signal to the process.
SIGTERM_TO_ANOTHER_THREAD = """
import signal, sys, threading, time
from rl.envs.remote import serve

def terminate_from_this_thread():
    while signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        time.sleep(0.01)
    signal.pthread_kill(threading.get_ident(), signal.SIGTERM)

threading.Thread(target=terminate_from_this_thread, daemon=True).start()
sys.exit(serve.main(["--env", "CartPole-v1", "--port", "0"]))
"""


@pytest.mark.process
def test_cli_stops_when_sigterm_is_delivered_to_a_thread_other_than_main():
    # A main thread blocked on a lock is not woken by a signal another thread received;
    # the server then ran on after SIGTERM (once in ~40 stops on a loaded machine).
    done = run_without_token([sys.executable, "-c", SIGTERM_TO_ANOTHER_THREAD])
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("serving CartPole-v1 on grpc://127.0.0.1:"), done.stdout


@pytest.mark.process
def test_cli_serves_on_a_free_port_and_stops_on_sigterm():
    process = subprocess.Popen(
        serve_command("--env", "CartPole-v1", "--port", "0"),
        cwd=ROOT,
        env=environment_without_token(),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        lines = []
        reader = threading.Thread(
            target=lambda: lines.append(process.stdout.readline()), daemon=True
        )
        reader.start()
        reader.join(60)
        assert lines, "no serving line within 60 s"
        match = re.fullmatch(
            r"serving CartPole-v1 on grpc://127\.0\.0\.1:(\d+) \(no token\)\n", lines[0]
        )
        assert match, lines[0]
        with grpc.insecure_channel(f"127.0.0.1:{match.group(1)}") as channel:
            stub = env_pb2_grpc.EnvServiceStub(channel)
            made = stub.Make(env_pb2.MakeRequest(env_id="CartPole-v1", num_envs=2), timeout=TIMEOUT)
            assert codec.decode_space(made.action_space) == gym.spaces.Discrete(2)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.process
def test_cli_stops_on_sigterm_after_undecodable_stream_requests():
    # grpcio never finishes a server-side stream whose request does not parse, so a
    # shutdown that waits for every call would wait forever.
    process, port = serve.launch("CartPole-v1", env=environment_without_token())
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            call = channel.stream_stream(
                SERVICE + "StepStream", request_serializer=None, response_deserializer=None
            )
            for _ in range(30):  # each leaves grpcio's shutdown waiting, or not: often
                error = refusal(lambda chunks, **kw: list(call(chunks, **kw)), iter([b"\xff"]))
                assert error.code() == Code.INTERNAL  # grpcio's "Exception deserializing request!"
            stub = env_pb2_grpc.EnvServiceStub(channel)
            made = stub.Make(env_pb2.MakeRequest(env_id="CartPole-v1", num_envs=1), timeout=TIMEOUT)
            assert made.session_id
        process.send_signal(signal.SIGTERM)
        try:
            # Its grace period is 2 s; the rest is room for a machine busy with other jobs.
            code = process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            code = "still running 30 s after SIGTERM"
        assert code == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
