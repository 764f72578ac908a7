"""clients/node: the Node.js client and random agent against a served env, as CI runs them.

The module is skipped only where `node` or `npm` is missing (CI has both); it runs
`npm ci` in clients/node when node_modules is missing. Servers are real
``python -m rl.envs.remote.serve`` processes on free ports.
"""

import base64
import json
import math
import os
import shutil
import socket
import subprocess

import gymnasium as gym
import numpy as np
import pytest

from rl.envs.remote import codec, env_pb2, serve
from rl.envs.remote.address import TOKEN_VARIABLE

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLIENT = os.path.join(ROOT, "clients", "node")
SERVED = "CartPole-v1,Pendulum-v1"
TOKEN = "secret"
CARTPOLE_X_LIMIT = 2.4  # CartPole-v1 terminates beyond these
CARTPOLE_ANGLE_LIMIT = 12 * 2 * math.pi / 360

pytestmark = [
    pytest.mark.process,
    pytest.mark.skipif(
        shutil.which("node") is None or shutil.which("npm") is None,
        reason="the Node.js client needs node and npm on PATH",
    ),
]


def environment(token=None):
    """This process's environment without the server token, or with the given one."""
    env = {k: v for k, v in os.environ.items() if k != TOKEN_VARIABLE}
    if token is not None:
        env[TOKEN_VARIABLE] = token
    return env


@pytest.fixture(scope="module")
def node_modules():
    if not os.path.isdir(os.path.join(CLIENT, "node_modules")):
        proc = subprocess.run(
            ["npm", "ci", "--no-audit", "--no-fund"],
            cwd=CLIENT,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, f"npm ci failed:\n{proc.stdout}\n{proc.stderr}"


def start(*flags):
    """An env server serving SERVED on a free port: (process, 'host:port')."""
    process, port = serve.launch(SERVED, *flags, env=environment())
    return process, f"127.0.0.1:{port}"


@pytest.fixture(scope="module")
def server(node_modules):
    process, address = start()
    yield address
    process.kill()
    process.wait()


@pytest.fixture(scope="module")
def token_server(node_modules):
    process, address = start("--token", TOKEN)
    yield address
    process.kill()
    process.wait()


def node(script, *args, token=None, stdin=None):
    return subprocess.run(
        ["node", script, *args],
        cwd=CLIENT,
        env=environment(token),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def agent(address, *flags, token=None):
    return node("random_agent.js", "--address", address, *flags, token=token)


def played(proc):
    """(episode lines, summary line) of a successful run."""
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    *episodes, summary = [json.loads(line) for line in proc.stdout.splitlines()]
    assert summary["episodes"] == len(episodes)
    assert [e["episode"] for e in episodes] == list(range(1, len(episodes) + 1))
    returns = [e["return"] for e in episodes]
    assert summary["mean_return"] == pytest.approx(np.mean(returns))
    return episodes, summary


def failed(proc):
    """The one stderr line of a run that failed."""
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


def mulberry32(seed):
    """env_client.js's generator, to replay the agent's actions."""
    mask = 0xFFFFFFFF
    state = seed & mask
    while True:
        state = (state + 0x6D2B79F5) & mask
        t = ((state ^ (state >> 15)) * (state | 1)) & mask
        t ^= (t + (((t ^ (t >> 7)) * (t | 61)) & mask)) & mask
        yield ((t ^ (t >> 14)) & mask) / 2**32


def replay_cartpole(num_envs, episodes, seed):
    """The agent's episodes, played locally: copy i reset with seed + i, actions drawn from
    mulberry32(seed) copy by copy, SAME_STEP autoreset, episodes counted copy by copy."""
    uniform = mulberry32(seed)
    envs = [gym.make("CartPole-v1") for _ in range(num_envs)]
    for i, env in enumerate(envs):
        env.reset(seed=seed + i)
    returns, lengths, finished = [0.0] * num_envs, [0] * num_envs, []
    while len(finished) < episodes:
        actions = [math.floor(next(uniform) * 2) for _ in range(num_envs)]
        steps = [env.step(a) for env, a in zip(envs, actions)]
        for i, (obs, reward, terminated, truncated, _) in enumerate(steps):
            if len(finished) == episodes:
                break
            returns[i] += float(reward)
            lengths[i] += 1
            if terminated or truncated:
                final = [float(x) for x in obs]
                finished.append((i, returns[i], lengths[i], bool(terminated), final))
                returns[i], lengths[i] = 0.0, 0
                envs[i].reset()
    return finished


def test_cartpole_episodes_return_one_per_step(server):
    episodes, summary = played(
        agent(server, "--env", "CartPole-v1", "--num_envs", "4", "--episodes", "12", "--seed", "0")
    )
    assert len(episodes) == 12
    assert summary["num_envs"] == 4 and summary["stream"] is False
    for e in episodes:
        assert e["return"] == e["length"]
        assert 8 <= e["length"] <= 500
        assert 0 <= e["copy"] < 4
        x, _, angle, _ = e["final_observation"]
        if e["terminated"]:  # the final observation is past a limit: it decoded right
            assert abs(x) > CARTPOLE_X_LIMIT or abs(angle) > CARTPOLE_ANGLE_LIMIT
        else:
            assert e["truncated"] and e["length"] == 500


def test_cartpole_episodes_are_those_of_a_local_replay(server):
    """Seeds, actions, autoreset and the float32 observations' bytes, all exact."""
    episodes, _ = played(
        agent(server, "--env", "CartPole-v1", "--num_envs", "4", "--episodes", "8", "--seed", "3")
    )
    got = [
        (e["copy"], e["return"], e["length"], e["terminated"], e["final_observation"])
        for e in episodes
    ]
    assert got == replay_cartpole(num_envs=4, episodes=8, seed=3)


def test_streaming_gives_the_episodes_of_unary_steps(server):
    flags = ["--env", "CartPole-v1", "--num_envs", "4", "--episodes", "10", "--seed", "7"]
    unary, unary_summary = played(agent(server, *flags))
    streamed, streamed_summary = played(agent(server, *flags, "--stream"))
    assert streamed_summary["stream"] is True
    assert streamed == unary
    assert streamed_summary["steps"] == unary_summary["steps"]


def test_pendulum_box_actions(server):
    episodes, _ = played(
        agent(server, "--env", "Pendulum-v1", "--num_envs", "2", "--episodes", "2", "--seed", "0")
    )
    assert len(episodes) == 2
    for e in episodes:
        assert math.isfinite(e["return"]) and e["return"] < 0
        assert e["length"] == 200 and e["truncated"] and not e["terminated"]
        cos, sin, speed = e["final_observation"]
        assert cos**2 + sin**2 == pytest.approx(1, abs=1e-5) and abs(speed) <= 8


def test_the_token_is_required_and_read_from_the_environment(token_server):
    flags = ["--env", "CartPole-v1", "--num_envs", "2", "--episodes", "2"]
    for token in (None, "wrong"):
        line = failed(agent(token_server, *flags, token=token))
        assert "UNAUTHENTICATED" in line and TOKEN_VARIABLE in line
    for stream in ([], ["--stream"]):
        episodes, _ = played(agent(token_server, *flags, *stream, token=TOKEN))
        assert len(episodes) == 2


def test_an_unknown_env_fails_with_the_servers_message(server):
    line = failed(agent(server, "--env", "NoSuchEnv-v0"))
    assert line.startswith("random_agent: error: ")
    assert "NOT_FOUND" in line and "'NoSuchEnv-v0'" in line and "CartPole-v1" in line


def test_an_unreachable_server_fails_in_one_line(node_modules):
    with socket.socket() as s:  # a port nobody listens on once this closes
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    line = failed(agent(f"127.0.0.1:{port}", "--env", "CartPole-v1", "--timeout", "10"))
    assert "unreachable" in line and "UNAVAILABLE" in line


def test_bad_flags_exit_2_with_usage(node_modules):
    proc = agent("127.0.0.1:1", "--env", "CartPole-v1", "--num_envs", "0")
    assert proc.returncode == 2
    assert proc.stderr.startswith("random_agent: error: --num_envs must be an integer")
    assert "usage:" in proc.stderr


# Decodes the tensors on stdin (dtype, shape, base64 bytes) and encodes them back.
TENSORS_SCRIPT = """
const { decodeTensor, encodeTensor } = require('./env_client');
const tensors = JSON.parse(require('node:fs').readFileSync(0, 'utf8'));
const shown = (x) => (typeof x === 'number' && !Number.isFinite(x) ? String(x) : x);
console.log(JSON.stringify(tensors.map(({ dtype, shape, data }) => {
  const tensor = decodeTensor({ dtype, shape, data: Buffer.from(data, 'base64') });
  const back = dtype === 'float16' ? null : encodeTensor(tensor).data.toString('base64');
  return { shape: tensor.shape, values: tensor.values.map(shown), back };
})));
"""


def test_tensors_decode_from_little_endian_bytes_and_encode_back(node_modules):
    arrays = [
        np.array([[True, False, True], [False, False, True]]),
        np.array([-128, -1, 0, 127], dtype=np.int8),
        np.array([0, 1, 200, 255], dtype=np.uint8),
        np.array([-32768, 32767], dtype=np.int16),
        np.array([0, 65535], dtype=np.uint16),
        np.array([-(2**31), 2**31 - 1], dtype=np.int32),
        np.array([0, 2**32 - 1], dtype=np.uint32),
        np.array([[-(2**53), -1], [0, 2**53]], dtype=np.int64),
        np.array([0, 2**53], dtype=np.uint64),
        np.array([1.5, -2.0, 65504.0, 6e-8, np.inf], dtype=np.float16),
        np.array([0.1, -3.4e38, np.inf, -np.inf, np.nan, 1e-45], dtype=np.float32),
        np.array([[0.1, 1e-300], [-np.inf, np.nan]], dtype=np.float64),
        np.array(2.5, dtype=np.float32),
        np.zeros((0, 3), dtype=np.int64),
    ]
    tensors = [codec.encode_tensor(a) for a in arrays]
    sent = [
        {"dtype": t.dtype, "shape": list(t.shape), "data": base64.b64encode(t.data).decode()}
        for t in tensors
    ]
    proc = node("-e", TENSORS_SCRIPT, stdin=json.dumps(sent))
    assert proc.returncode == 0, proc.stderr
    for array, tensor, got in zip(arrays, tensors, json.loads(proc.stdout)):
        assert got["shape"] == list(array.shape)
        values = np.array([float(v) if isinstance(v, str) else v for v in got["values"]])
        np.testing.assert_array_equal(values, array.ravel().astype(values.dtype), str(array.dtype))
        if got["back"] is not None:
            assert base64.b64decode(got["back"]) == tensor.data, array.dtype


# Reads MakeResponse bytes, samples 200 actions for 3 copies and writes StepRequest bytes,
# with the (de)serializers the client's calls use.
ACTIONS_SCRIPT = """
const { decodeSpace, loadDefinition, mulberry32, sampleActions } = require('./env_client');
const service = loadDefinition()['rl.envs.remote.EnvService'];
const make = service.Make.responseDeserialize(Buffer.from(require('node:fs').readFileSync(0, 'utf8'), 'base64'));
const space = decodeSpace(make.action_space);
const uniform = mulberry32(1);
for (let k = 0; k < 200; k++) {
  const request = { session_id: 's', actions: sampleActions(space, 3, uniform), seq: k + 1 };
  console.log(service.Step.requestSerialize(request).toString('base64'));
}
"""

# name: (space, per flattened entry: the set of values drawn, or (low, high) that the
# draws come near, or "normal" / "exponential above 0" / "exponential below 5")
ACTION_SPACES = {
    "discrete": (gym.spaces.Discrete(3, start=-1), [{-1, 0, 1}]),
    "box": (gym.spaces.Box(-2.0, np.array([1.0, 3.0], dtype=np.float32)), [(-2, 1), (-2, 3)]),
    "unbounded_box": (
        gym.spaces.Box(
            np.array([-np.inf, 0.0, -np.inf]), np.array([np.inf, np.inf, 5.0]), dtype=np.float64
        ),
        ["normal", "exponential above 0", "exponential below 5"],
    ),
    "integer_box": (gym.spaces.Box(0, 255, (2, 2), dtype=np.uint8), [(0, 255)] * 4),
    "multi_discrete": (
        gym.spaces.MultiDiscrete([2, 5], start=[0, -2]),
        [{0, 1}, {-2, -1, 0, 1, 2}],
    ),
    "multi_binary": (gym.spaces.MultiBinary([2, 3]), [{0, 1}] * 6),
}


@pytest.mark.parametrize("name", sorted(ACTION_SPACES))
def test_random_actions_are_valid_and_cover_the_space(node_modules, name):
    space, entries = ACTION_SPACES[name]
    make = env_pb2.MakeResponse(action_space=codec.encode_space(space))
    proc = node("-e", ACTIONS_SCRIPT, stdin=base64.b64encode(make.SerializeToString()).decode())
    assert proc.returncode == 0, proc.stderr
    batches = []
    for k, line in enumerate(proc.stdout.split()):
        request = env_pb2.StepRequest.FromString(base64.b64decode(line))
        assert request.seq == k + 1
        batch = codec.decode_value(request.actions)
        assert codec.mismatch(space, batch, batch=3) == ""  # dtype, shape and bounds
        batches.append(batch)
    columns = np.concatenate(batches).reshape(600, -1).T.astype(np.float64)
    assert len(columns) == len(entries)
    for column, expected in zip(columns, entries):
        if isinstance(expected, set):
            assert set(column.tolist()) == expected
        elif isinstance(expected, tuple):
            low, high = expected
            margin = 0.05 * (high - low)
            assert column.min() < low + margin and column.max() > high - margin
        elif expected == "normal":
            assert abs(column.mean()) < 0.2 and 0.8 < column.std() < 1.2
        elif expected == "exponential above 0":
            assert column.min() >= 0 and 0.8 < column.mean() < 1.2
        else:
            assert column.max() <= 5 and 3.8 < column.mean() < 4.2
