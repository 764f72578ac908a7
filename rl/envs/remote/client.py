"""Gymnasium clients of an env server: ``RemoteEnv`` (one env) and ``RemoteVectorEnv``.

``--env grpc://host:port/ID`` builds these (rl/envs/make.py), so every agent,
``--num_workers``, evaluation and video work on a served env. The vector client
steps all its copies in one call and follows Gymnasium's SAME_STEP autoreset, as
``make_vec_env`` does locally. Observations get rl's standard treatment on this
side (non-Box flattened to float32, other Box dtypes cast to float32).

Every call has a deadline: a server that does not answer within
$RL_ENV_SERVER_ANSWER_SECONDS (default 5; making envs may take longer) is taken as
frozen, as one that cannot be reached is taken as gone. Either is said in one line and
the call retried with backoff for $RL_ENV_SERVER_RETRY_SECONDS (default 30) from then;
steps carry a sequence number, so a retried step is never taken twice, and a Make an id,
so a retried Make gets the session the first made (the server closes one whose answer
found the client gone). A call refused because its session is busy with the one that
timed out is retried too (trailing metadata ``codec.BUSY_METADATA`` says so). After that, or
when the server lost the session (it restarted), ``EnvServerError`` says so in one line.
"""

import json
import os
import queue
import secrets
import sys
import threading
import time
from typing import Any, Dict, Iterator, Optional, Tuple

import grpc
import gymnasium as gym
import numpy as np

from rl.envs.remote import address as remote_url
from rl.envs.remote import codec, env_pb2, env_pb2_grpc
from rl.errors import EnvServerError, first_line
from rl.processes import (
    MAX_WAIT_SECONDS,
    STOP_ASKED,
    answer_seconds_variable,
    seconds_variable,
)

RETRY_VARIABLE = "RL_ENV_SERVER_RETRY_SECONDS"
ANSWER_VARIABLE = "RL_ENV_SERVER_ANSWER_SECONDS"
CA_VARIABLE = "RL_ENV_SERVER_CA"  # a PEM file of the CA certificates grpcs:// trusts
DEFAULT_RETRY_SECONDS = 30.0
DEFAULT_ANSWER_SECONDS = 5.0  # an answer in flight when a signal comes is awaited this long
MAKE_TIMEOUT_SECONDS = 120.0  # making envs can be slow (loading a simulator)
# What is retried: a server that cannot be reached, one that did not answer in time, and
# (after that) one whose session is still busy with the call that timed out (ABORTED with
# codec.BUSY_METADATA).
RETRIED_CODES = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
FIRST_BACKOFF_SECONDS = 0.05
MAX_BACKOFF_SECONDS = 2.0
MAX_MESSAGE_BYTES = 256 * 1024 * 1024


def channel_options(
    keepalive_seconds: float = codec.KEEPALIVE_SECONDS,
    keepalive_timeout_seconds: float = codec.KEEPALIVE_TIMEOUT_SECONDS,
) -> list:
    """The options of a channel to an env server: message sizes, and keepalive pings, so
    that a server machine that vanishes without closing the connection (half-open TCP)
    is noticed even by a call still far from its deadline (a Make's); pings go on while
    a call sends no data (gRPC's default stops after two)."""
    return [
        ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
        ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        *codec.keepalive_options(keepalive_seconds, keepalive_timeout_seconds),
        ("grpc.http2.max_pings_without_data", 0),
    ]


CHANNEL_OPTIONS = channel_options()


def retry_seconds() -> float:
    """How long a server that is unreachable or does not answer is retried."""
    # nan or inf would retry for ever (a stall the user does not see), a negative number
    # not at all; a day is more than any restart of a server takes.
    return seconds_variable(
        RETRY_VARIABLE,
        DEFAULT_RETRY_SECONDS,
        lambda s: 0 <= s <= MAX_WAIT_SECONDS,
        "0 to 86400",
        EnvServerError,
    )


def answer_seconds() -> float:
    """How long a call waits for the server's answer before it is taken as frozen."""
    return answer_seconds_variable(ANSWER_VARIABLE, DEFAULT_ANSWER_SECONDS, EnvServerError)


def root_certificates() -> Optional[bytes]:
    """The CA certificates ``$RL_ENV_SERVER_CA`` names, or None for the system's."""
    path = os.environ.get(CA_VARIABLE)
    if not path:
        return None
    try:
        with open(path, "rb") as f:
            pem = f.read()
    except OSError as e:
        raise EnvServerError(f"${CA_VARIABLE} {path} cannot be read ({e.strerror})") from None
    if remote_url.PEM_CERTIFICATE not in pem:
        raise EnvServerError(f"${CA_VARIABLE} {path} holds no PEM certificate")
    return pem


def queued_requests(requests: queue.SimpleQueue) -> Iterator:
    """What is put on ``requests``, in order, until a None: the request side of a
    stream that gRPC reads while the caller keeps putting."""
    while True:
        item = requests.get()
        if item is None:
            return
        yield item


def is_busy(error: grpc.RpcError) -> bool:
    """Whether the server refused the call because its session is busy with another (the
    one that timed out): its trailing metadata says so, whatever its details' words."""
    trailing = error.trailing_metadata() if hasattr(error, "trailing_metadata") else None
    return error.code() == grpc.StatusCode.ABORTED and codec.BUSY_METADATA in tuple(trailing or ())


def failure(error: grpc.RpcError) -> Tuple[grpc.StatusCode, str, bool]:
    """(code, details, whether it is busy) of a failed call, for ``Retries.after``."""
    return error.code(), (error.details() or "").strip(), is_busy(error)


class Retries:
    """The tries of one call: each with a deadline, then, from the first failure on, with
    backoff within the retry window (opened with one line on stderr)."""

    def __init__(self, connection: "Connection", method: str, answer_seconds: float):
        """Args:
        connection: the server's.
        method: the call's name ("Step"), for the lines.
        answer_seconds: each try's deadline.
        """
        self.connection = connection
        self.method = method
        self.answer_seconds = answer_seconds
        self.until: Optional[float] = None  # the window's end, once open
        self.backoff = FIRST_BACKOFF_SECONDS
        self.said = False  # the line about a server that stopped answering

    def timeout(self) -> float:
        """The next try's deadline, within what is left of the window once it is open."""
        if self.until is None:
            return self.answer_seconds
        return max(min(self.answer_seconds, self.until - time.monotonic()), 0.001)

    def after(self, code: grpc.StatusCode, details: str, busy: bool = False) -> None:
        """Waits before the next try of a call that failed with ``code`` (``busy``: refused
        while its session was busy with another call).

        Raises:
            EnvServerError: the failure is not one to retry, or the window has passed.
        """
        connection = self.connection
        if not (busy or code in RETRIED_CODES):
            raise connection.error(code, details)
        if STOP_ASKED.is_set():  # the run stops: a retry would only delay it
            raise EnvServerError(
                f"env server {connection.url} did not answer {self.method} as the run stopped"
            )
        now = time.monotonic()
        if self.until is None:
            self.until = now + connection.retry_seconds
        if code != grpc.StatusCode.UNAVAILABLE and not self.said:
            # A frozen server stalled training without a word; an unreachable one is
            # retried silently (at start-up, the one line of its error says it all).
            self.said = True
            print(
                f"rl: {self.trouble(code)}; retrying for up to {self.until - now:.1f} s "
                f"(${RETRY_VARIABLE})",
                file=sys.stderr,
                flush=True,
            )
        if now + self.backoff > self.until:
            connection.given_up = True
            raise EnvServerError(
                f"{self.trouble(code)}, nor while retried for {connection.retry_seconds:g} s "
                f"(${RETRY_VARIABLE})"
                if code != grpc.StatusCode.UNAVAILABLE
                else f"env server {connection.url} is unreachable (retried for "
                f"{connection.retry_seconds:g} s, ${RETRY_VARIABLE}): "
                f"{first_line(details) or 'no answer'}"
            )
        connection.was_unreachable = True
        time.sleep(self.backoff)
        self.backoff = min(self.backoff * 2, MAX_BACKOFF_SECONDS)

    def trouble(self, code: grpc.StatusCode) -> str:
        """What is wrong with the server, in words."""
        url = self.connection.url
        if code == grpc.StatusCode.UNAVAILABLE:
            return f"env server {url} is unreachable"
        return (
            f"env server {url} stopped answering: no answer to {self.method} within "
            f"{self.answer_seconds:g} s (${ANSWER_VARIABLE})"
        )


class StreamWatchdog:
    """Cancels a step stream whose answer is late: a stream's messages have no deadline
    of their own, and ``next`` on it would wait for a frozen server for ever.

    One thread per session, started at the first ``arm``, looking at the deadline armed
    at least once a second; arming costs a step a few assignments under a lock.
    """

    IDLE_SECONDS = 1.0  # how often the thread looks again while nothing is armed
    # Once a signal asked the run to stop, an answer later than this is not awaited.
    STOPPING_SECONDS = 1.0

    def __init__(self):
        self._lock = threading.Lock()
        self._call = None
        self._deadline: Optional[float] = None
        self._armed_at = 0.0
        self._stopped = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._fired = False  # the call armed last was cancelled for being late

    def arm(self, call, seconds: float) -> None:
        """Cancels ``call`` (a gRPC stream) unless ``disarm`` comes within ``seconds``."""
        with self._lock:
            self._armed_at = time.monotonic()
            self._call, self._deadline, self._fired = call, self._armed_at + seconds, False
        if self._thread is None:
            self._thread = threading.Thread(target=self._watch, name="step watchdog", daemon=True)
            self._thread.start()

    def disarm(self) -> bool:
        """Ends the watch; returns whether the call was cancelled for being late."""
        with self._lock:
            self._call, self._deadline = None, None
            return self._fired

    def stop(self) -> None:
        self._stopped.set()
        if self._thread is not None:
            self._thread.join()

    def _watch(self) -> None:
        while not self._stopped.is_set():
            with self._lock:
                now = time.monotonic()
                if self._deadline is not None and STOP_ASKED.is_set():
                    self._deadline = min(self._deadline, self._armed_at + self.STOPPING_SECONDS)
                if self._deadline is not None and now >= self._deadline:
                    self._call.cancel()
                    self._fired, self._call, self._deadline = True, None, None
                sleep = self.IDLE_SECONDS if self._deadline is None else self._deadline - now
            self._stopped.wait(timeout=min(sleep, self.IDLE_SECONDS))


class Connection:
    """One channel to an env server, with the token, deadlines, retries and error lines."""

    def __init__(self, url: str):
        self.url = url
        self.address = remote_url.parse(url)
        if self.address.tls:
            credentials = grpc.ssl_channel_credentials(root_certificates=root_certificates())
            self.channel = grpc.secure_channel(self.address.target, credentials, CHANNEL_OPTIONS)
        else:
            self.channel = grpc.insecure_channel(self.address.target, CHANNEL_OPTIONS)
        self.stub = env_pb2_grpc.EnvServiceStub(self.channel)
        try:
            token = remote_url.token_from_environment()
        except ValueError as e:
            raise EnvServerError(str(e)) from None
        self.metadata = (("authorization", f"Bearer {token}"),) if token else None
        self.retry_seconds = retry_seconds()
        self.answer_seconds = answer_seconds()
        self.was_unreachable = False  # set once a call had to wait for the server
        self.given_up = False  # set once a call was retried for the whole window in vain

    def call(self, method: str, request, timeout: Optional[float] = None):
        """``stub.method(request)`` with a deadline (``timeout``, else the answer seconds),
        retried with backoff while the server is unreachable or does not answer."""
        retries = Retries(self, method, timeout or self.answer_seconds)
        while True:
            try:
                return getattr(self.stub, method)(
                    request, timeout=retries.timeout(), metadata=self.metadata
                )
            except grpc.RpcError as e:
                retries.after(*failure(e))

    def error(self, code: grpc.StatusCode, details: str) -> EnvServerError:
        """One line saying what went wrong with the server (a failure not retried)."""
        if code == grpc.StatusCode.UNAUTHENTICATED:
            return EnvServerError(
                f"env server {self.url} refused the auth token: set ${remote_url.TOKEN_VARIABLE} "
                "to the server's token"
            )
        if code == grpc.StatusCode.NOT_FOUND and "session" in details:
            if self.was_unreachable:
                return EnvServerError(
                    f"env server {self.url} restarted and lost this client's session "
                    "(it was unreachable, then answered without it)"
                )
            return EnvServerError(f"env server {self.url} lost this client's session: {details}")
        return EnvServerError(f"env server {self.url}: {code.name}: {details}")

    def close(self) -> None:
        self.channel.close()


class _Session:
    """A session of ``num_envs`` copies on the server: make, reset, step, render, close."""

    def __init__(
        self,
        url: str,
        num_envs: int,
        render_mode: Optional[str],
        autoreset: bool,
        stream: bool,
        max_episode_steps: Optional[int],
    ):
        self.connection = Connection(url)
        address = self.connection.address
        response = self.connection.call(
            "Make",
            env_pb2.MakeRequest(
                env_id=address.env_id,
                num_envs=num_envs,
                kwargs_json=json.dumps(address.kwargs) if address.kwargs else "",
                render_mode=render_mode or "",
                autoreset=autoreset,
                max_episode_steps=max_episode_steps,  # None: unset, the server's default
                # The same in every try: a retry gets the session a late answer told of.
                make_id=secrets.token_hex(16),
            ),
            timeout=max(MAKE_TIMEOUT_SECONDS, self.connection.answer_seconds),
        )
        self.id = response.session_id
        self.num_envs = num_envs
        self.observation_space = codec.decode_space(response.observation_space)
        self.action_space = codec.decode_space(response.action_space)
        self.max_episode_steps = response.max_episode_steps or None
        self.metadata = json.loads(response.metadata_json or "{}")
        self.seq = 0
        self.stream = stream
        self._requests: Optional[queue.SimpleQueue] = None
        self._responses = None
        self._closed = False
        self._lock = threading.Lock()
        self._watchdog = StreamWatchdog()

    def reset(self, seed: Optional[int], options: Optional[dict]):
        request = env_pb2.ResetRequest(
            session_id=self.id, options_json=json.dumps(options) if options else ""
        )
        if seed is not None:
            request.seed = int(seed)
        response = self.connection.call("Reset", request)
        infos = [codec.decode_info(text) for text in response.infos_json]
        return codec.decode_value(response.observations), infos

    def step(self, actions: Any) -> env_pb2.StepResponse:
        # The seq advances only with a step the server took: a refused one (bad actions,
        # an env that raised) is not counted, so the session goes on after a Reset.
        request = env_pb2.StepRequest(
            session_id=self.id, actions=codec.encode_value(actions), seq=self.seq + 1
        )
        if self.stream:
            response = self._stream_step(request)
        else:
            response = self.connection.call("Step", request)
        self.seq += 1
        return response

    def _stream_step(self, request: env_pb2.StepRequest) -> env_pb2.StepResponse:
        retries = Retries(self.connection, "Step", self.connection.answer_seconds)
        while True:
            if self._responses is None:
                self._requests = queue.SimpleQueue()
                self._responses = self.connection.stub.StepStream(
                    queued_requests(self._requests), metadata=self.connection.metadata
                )
            self._requests.put(request)
            self._watchdog.arm(self._responses, retries.timeout())
            try:
                response = next(self._responses)
            except grpc.RpcError as e:
                late = self._watchdog.disarm()
                code, details, busy = failure(e)
                if late:
                    code = grpc.StatusCode.DEADLINE_EXCEEDED
                self._end_stream()
                if code == grpc.StatusCode.RESOURCE_EXHAUSTED and "stream" in details:
                    self.stream = False  # the server's streams are all taken: unary calls
                    return self.connection.call("Step", request)
                retries.after(code, details, busy)  # then resend the same seq on a new stream
            else:
                if self._watchdog.disarm():
                    self._end_stream()  # cancelled as the answer came: the next step opens another
                return response

    def _end_stream(self) -> None:
        if self._requests is not None:
            self._requests.put(None)
        if self._responses is not None:
            self._responses.cancel()
        self._requests, self._responses = None, None

    def render(self, index: int) -> np.ndarray:
        response = self.connection.call(
            "Render", env_pb2.RenderRequest(session_id=self.id, index=index)
        )
        return codec.decode_tensor(response.frame)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._end_stream()
        self._watchdog.stop()
        if self.connection.given_up:  # no wait for a server that stopped answering
            self.connection.close()
            return
        try:  # best effort: an unreachable server expires the session itself
            self.connection.stub.Close(
                env_pb2.CloseRequest(session_id=self.id),
                timeout=2.0,
                metadata=self.connection.metadata,
            )
        except grpc.RpcError:
            pass
        self.connection.close()


def _observation_treatment(space: gym.Space):
    """rl's standard observation treatment (make.py): (space the agent sees, per-copy map)."""
    if not isinstance(space, gym.spaces.Box):
        flat = gym.spaces.flatten_space(space)
        flat = gym.spaces.Box(flat.low, flat.high, dtype=np.float32)
        return flat, lambda obs: gym.spaces.flatten(space, obs).astype(np.float32)
    if space.dtype not in (np.float32, np.uint8):
        cast = gym.spaces.Box(space.low, space.high, dtype=np.float32)
        return cast, lambda obs: np.asarray(obs, dtype=np.float32)
    return space, None


def _to_wire(space: gym.Space, actions: Any) -> Any:
    """Batched actions in the dtypes of ``space``'s leaves."""
    if isinstance(space, gym.spaces.Tuple):
        return tuple(_to_wire(s, a) for s, a in zip(space.spaces, actions))
    if isinstance(space, gym.spaces.Dict):
        return {k: _to_wire(s, actions[k]) for k, s in space.spaces.items()}
    return np.asarray(actions, dtype=space.dtype)


class RemoteVectorEnv(gym.vector.VectorEnv):
    """``num_envs`` copies of a served env, stepped in one call per step (SAME_STEP autoreset)."""

    def __init__(
        self,
        url: str,
        num_envs: int,
        render_mode: Optional[str] = None,
        stream: bool = True,
        max_episode_steps: Optional[int] = None,
    ):
        """Opens a session on the server.

        Args:
          url: grpc[s]://host:port/ENV_ID[?kwargs].
          num_envs: copies.
          render_mode: None or "rgb_array" (frames travel over the wire).
          stream: step over one bidirectional stream (faster: no per-call set-up) instead
            of one unary call per step.
          max_episode_steps: the server cuts the episodes of an env without a time limit
            of its own there (None: at the server's default, DEFAULT_MAX_EPISODE_STEPS).
        """
        self._session = _Session(
            url, num_envs, render_mode, True, stream=stream, max_episode_steps=max_episode_steps
        )
        self.url = url
        self.num_envs = num_envs
        self.render_mode = render_mode
        self._served_space = self._session.observation_space
        self.single_observation_space, self._treat = _observation_treatment(self._served_space)
        self.single_action_space = self._session.action_space
        self.observation_space = gym.vector.utils.batch_space(
            self.single_observation_space, num_envs
        )
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, num_envs)
        self.metadata = dict(self._session.metadata)
        self.metadata["autoreset_mode"] = gym.vector.AutoresetMode.SAME_STEP
        self.max_episode_steps = self._session.max_episode_steps

    def _observations(self, batched: Any) -> np.ndarray:
        if self._treat is None:
            return batched
        copies = codec.unstack(self._served_space, batched, self.num_envs)
        return np.stack([self._treat(obs) for obs in copies])

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        """Resets every copy; copy i is seeded with seed + i."""
        if seed is not None and not isinstance(seed, (int, np.integer)):
            raise ValueError(
                f"a remote vector env takes one int seed (copy i gets seed + i), got {seed!r}"
            )
        obs, infos = self._session.reset(seed, options)
        info: Dict[str, Any] = {}
        for i, copy_info in enumerate(infos):
            info = self._add_info(info, copy_info, i)
        return self._observations(obs), info

    def step(self, actions):
        response = self._session.step(_to_wire(self.single_action_space, actions))
        obs = self._observations(codec.decode_value(response.observations))
        rewards = codec.decode_tensor(response.rewards)
        terminated = codec.decode_tensor(response.terminated)
        truncated = codec.decode_tensor(response.truncated)
        info: Dict[str, Any] = {}
        ended = terminated | truncated
        finals = None
        if response.HasField("final_observations"):
            finals = self._observations(codec.decode_value(response.final_observations))
        for i, text in enumerate(response.infos_json):
            if not text and not ended[i]:
                continue  # nothing to add (most steps of most envs)
            copy_info = codec.decode_info(text)
            if ended[i] and finals is not None:
                copy_info["final_obs"] = finals[i]
                copy_info["final_info"] = codec.decode_info(response.final_infos_json[i])
            info = self._add_info(info, copy_info, i)
        return obs, rewards, terminated, truncated, info

    def render(self) -> Optional[Tuple[np.ndarray, ...]]:
        """One frame per copy (rgb_array sessions), fetched from the server."""
        if self.render_mode != "rgb_array":
            return None
        return tuple(self._session.render(i) for i in range(self.num_envs))

    def close_extras(self, **kwargs) -> None:
        self._session.close()


class RemoteEnv(gym.Env):
    """One served env: the client calls reset when an episode ends (no autoreset)."""

    def __init__(
        self, url: str, render_mode: Optional[str] = None, max_episode_steps: Optional[int] = None
    ):
        """Opens a one-copy session on the server.

        Args:
          url: grpc[s]://host:port/ENV_ID[?kwargs].
          render_mode: None or "rgb_array".
          max_episode_steps: as for ``RemoteVectorEnv``.
        """
        self._session = _Session(url, 1, render_mode, False, False, max_episode_steps)
        self.url = url
        self.render_mode = render_mode
        self.observation_space = self._session.observation_space
        self.action_space = self._session.action_space
        self.metadata = dict(self._session.metadata)
        self.metadata["render_modes"] = ["rgb_array"]
        self.spec = None

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        super().reset(seed=seed)
        obs, infos = self._session.reset(seed, options)
        return codec.unstack(self.observation_space, obs, 1)[0], infos[0]

    def step(self, action):
        batched = _to_wire(self.action_space, _batch_one(self.action_space, action))
        response = self._session.step(batched)
        obs = codec.unstack(self.observation_space, codec.decode_value(response.observations), 1)[0]
        reward = float(codec.decode_tensor(response.rewards)[0])
        terminated = bool(codec.decode_tensor(response.terminated)[0])
        truncated = bool(codec.decode_tensor(response.truncated)[0])
        return obs, reward, terminated, truncated, codec.decode_info(response.infos_json[0])

    def render(self) -> Optional[np.ndarray]:
        if self.render_mode != "rgb_array":
            return None
        return self._session.render(0)

    def close(self) -> None:
        self._session.close()


def _batch_one(space: gym.Space, action: Any) -> Any:
    if isinstance(space, gym.spaces.Tuple):
        return tuple(_batch_one(s, a) for s, a in zip(space.spaces, action))
    if isinstance(space, gym.spaces.Dict):
        return {k: _batch_one(s, action[k]) for k, s in space.spaces.items()}
    return np.asarray(action)[None]
