"""The env server: serves registered rl envs and Gymnasium ids over gRPC.

    python -m rl.envs.remote.serve --env CartPole-v1 --port 50051

Each client session holds ``num_envs`` copies of one env, stepped together on one
call. The server binds 127.0.0.1 unless ``--host`` says otherwise, and refuses a
non-loopback host without an auth token (``--token`` or $RL_ENV_SERVER_TOKEN),
which clients send as ``authorization: Bearer <token>`` metadata. Every request
is checked before it reaches an env: a malformed or hostile one gets a gRPC
status (INVALID_ARGUMENT, NOT_FOUND, RESOURCE_EXHAUSTED, ...) and the server
goes on serving everyone else. An env that raises is reported to its client
and that session must be reset. Idle sessions expire.

Imports NumPy, Gymnasium, grpcio and rl's light modules only (no TensorFlow),
so it runs in a virtualenv of its own, with the env's own dependencies.
"""

import argparse
import contextlib
import hmac
import ipaddress
import itertools
import json
import logging
import os
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent import futures
from typing import Any, Dict, List, NamedTuple, Optional, Sequence

import grpc
import gymnasium as gym
import numpy as np
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

# The catalog: rl's game envs (tictactoe...) sit above rl.envs; this command is an entry
# point, declared in .importlinter as one that may import it.
from rl import catalog, command_line, plugins  # noqa: F401  (catalog fills the registries)
from rl.command_line import float_in_range, int_in_range
from rl.envs.make import bound_episodes, check_env_name, is_multi_agent, make_raw_env
from rl.envs.parallel import is_parallel_env
from rl.envs.remote import codec, env_pb2, env_pb2_grpc
from rl.envs.remote.address import (
    PEM_CERTIFICATE,
    TOKEN_VARIABLE,
    check_token,
    token_from_environment,
)
from rl.errors import PluginError, UnknownNameError, error_line, one_line
from rl.fields import DEFAULT_MAX_EPISODE_STEPS, MAX_STEPS
from rl.version import __version__

LOG = logging.getLogger("rl.envs.remote.serve")
ANY_ENV = "*"
HEALTH_PREFIX = "/grpc.health.v1.Health/"
BUSY_WAIT_SECONDS = 5.0  # a second call on a session waits this long for the first
RESERVED_THREADS = 4  # server threads kept from step streams, for unary calls and health
STOP_POLL_SECONDS = 0.2  # how late a stop signal may be noticed (see main)
# How often a client may ping (rl's client pings every codec.KEEPALIVE_SECONDS).
MIN_CLIENT_PING_SECONDS = 30.0


class Limits(NamedTuple):
    max_sessions: int = 64
    max_envs_per_session: int = 256
    max_total_envs: int = 1024
    idle_timeout: float = 600.0  # seconds without a call before a session is closed
    max_message_bytes: int = 64 * 1024 * 1024


class Refusal(Exception):
    """A request the server answers with a status instead of serving."""

    def __init__(self, code: grpc.StatusCode, message: str, trailing: tuple = ()):
        """Args:
        code: the status.
        message: its details.
        trailing: trailing metadata pairs (``codec.BUSY_METADATA``: retry the call).
        """
        super().__init__(message)
        self.code = code
        self.trailing = trailing


def invalid(message: str) -> Refusal:
    return Refusal(grpc.StatusCode.INVALID_ARGUMENT, message)


def busy(message: str) -> Refusal:
    """ABORTED with ``codec.BUSY_METADATA``: the client tries again."""
    return Refusal(grpc.StatusCode.ABORTED, message, (codec.BUSY_METADATA,))


class Session:
    """``num_envs`` copies of one env, with what a correct step sequence needs."""

    def __init__(
        self,
        session_id: str,
        env_id: str,
        envs: List[gym.Env],
        autoreset: bool,
        seed,
        made: env_pb2.MakeResponse,
        make_id: str = "",
    ):
        self.id = session_id
        self.made = made  # the Make answer, again for a retried Make (``make_id``)
        self.make_id = make_id
        self.env_id = env_id
        self.envs = envs
        self.autoreset = autoreset
        self.observation_space = envs[0].observation_space
        self.action_space = envs[0].action_space
        self.seed = seed  # used by the first reset that names none
        self.lock = threading.Lock()
        self.last_used = time.monotonic()
        self.needs_reset = True  # before the first Reset, and after an env raised
        self.ended = np.zeros(len(envs), dtype=bool)  # without autoreset: copies to reset
        self.last_seq = 0
        self.last_response: Optional[env_pb2.StepResponse] = None

    def close(self) -> None:
        for env in self.envs:
            try:
                env.close()
            except Exception:  # an env's close failing must not keep the others open
                LOG.exception("closing a copy of %s raised", self.env_id)


class SessionTable:
    """Sessions by id, within the limits; idle ones are closed."""

    def __init__(self, limits: Limits):
        self.limits = limits
        self._sessions: Dict[str, Session] = {}
        self._reserved: List[int] = []  # env counts of sessions being made
        self._lock = threading.Lock()

    def reserve(self, num_envs: int) -> None:
        """Holds room for a session of ``num_envs`` while it is made (``add`` or ``release``
        ends the hold); raises RESOURCE_EXHAUSTED if it would break a limit. Sessions being
        made count, so concurrent Makes cannot pass a limit together."""
        self.expire_idle()
        with self._lock:
            if num_envs > self.limits.max_envs_per_session:
                raise Refusal(
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                    f"num_envs {num_envs} is over this server's limit of "
                    f"{self.limits.max_envs_per_session} per session",
                )
            if len(self._sessions) + len(self._reserved) >= self.limits.max_sessions:
                raise Refusal(
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                    f"this server holds its limit of {self.limits.max_sessions} sessions: "
                    "close one or wait for idle ones to expire",
                )
            total = sum(len(s.envs) for s in self._sessions.values()) + sum(self._reserved)
            if total + num_envs > self.limits.max_total_envs:
                raise Refusal(
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                    f"{num_envs} more envs would put this server over its limit of "
                    f"{self.limits.max_total_envs} ({total} in use)",
                )
            self._reserved.append(num_envs)

    def release(self, num_envs: int) -> None:
        """Ends the hold of a ``reserve`` whose session was not made."""
        with self._lock:
            self._reserved.remove(num_envs)

    def add(self, session: Session) -> None:
        """Turns the hold of ``reserve`` into the session."""
        with self._lock:
            self._reserved.remove(len(session.envs))
            self._sessions[session.id] = session

    def get(self, session_id: str) -> Session:
        with self._lock:
            session = self._sessions.get(session_id)
        if session is None:
            raise Refusal(
                grpc.StatusCode.NOT_FOUND,
                f"no session {session_id!r} (closed, expired after "
                f"{self.limits.idle_timeout:g} s idle, or from a server that restarted)",
            )
        session.last_used = time.monotonic()
        return session

    def made_by(self, make_id: str) -> Optional[Session]:
        """The session a Make with ``make_id`` made, if it is still open."""
        with self._lock:
            return next((s for s in self._sessions.values() if s.make_id == make_id), None)

    def pop(self, session_id: str) -> Optional[Session]:
        with self._lock:
            return self._sessions.pop(session_id, None)

    def expire_idle(self) -> None:
        now = time.monotonic()
        with self._lock:
            idle = [
                s
                for s in self._sessions.values()
                if now - s.last_used > self.limits.idle_timeout and not s.lock.locked()
            ]
            for session in idle:
                del self._sessions[session.id]
        for session in idle:
            LOG.info(
                "session %s (%s) expired after %.0f s idle",
                session.id,
                session.env_id,
                now - session.last_used,
            )
            session.close()

    def close_all(self) -> None:
        with self._lock:
            sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            session.close()

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)


def env_maker(env_ids: Sequence[str]):
    """A function (env_id, render_mode, kwargs) -> gym.Env for the ids this server serves."""
    allowed = None if ANY_ENV in env_ids else set(env_ids)

    def make(env_id: str, render_mode: Optional[str], kwargs: Dict[str, Any]) -> gym.Env:
        if allowed is not None and env_id not in allowed:
            raise Refusal(
                grpc.StatusCode.NOT_FOUND,
                f"this server does not serve {env_id!r}: it serves {', '.join(sorted(allowed))}",
            )
        try:
            check_env_name(env_id)
        except UnknownNameError as e:
            raise Refusal(grpc.StatusCode.NOT_FOUND, str(e)) from None
        env = make_raw_env(env_id, render_mode, **kwargs)  # EnvService bounds its episodes
        if is_parallel_env(env):  # a plugin's env, or one the server serves as "*"
            env.close()
            raise Refusal(grpc.StatusCode.INVALID_ARGUMENT, single_agent_only(env_id))
        return env

    return make


def single_agent_only(env_id: str) -> str:
    """Why a multi-agent env is not served, in one line."""
    return (
        f"{env_id} is a multi-agent env (PettingZoo's Parallel API); the env server serves "
        "single-agent envs"
    )


def client_gave_up(context) -> bool:
    """Whether the client no longer awaits this call's answer: it cancelled, or its
    deadline passed. The deadline is read from the clock as well, since gRPC marks the
    call inactive only once its own thread has handled the expiry, which can come later."""
    remaining = context.time_remaining()
    return not context.is_active() or (remaining is not None and remaining <= 0)


class EnvService(env_pb2_grpc.EnvServiceServicer):
    """The EnvService of env.proto over a SessionTable."""

    def __init__(self, make_env, limits: Limits, max_streams: int = 16):
        """Args:
        make_env: (env_id, render_mode, kwargs) -> gym.Env.
        limits: sessions, envs and message sizes.
        max_streams: StepStreams open at once (each holds a server thread).
        """
        self.make_env = make_env
        self.sessions = SessionTable(limits)
        self.max_streams = max_streams
        self._open_streams = 0
        self._streams_lock = threading.Lock()
        self._ids = itertools.count(1)
        self._making: set = set()  # the make_ids of Makes under way
        self._making_lock = threading.Lock()

    # --- plumbing: every handler turns refusals and surprises into statuses ------
    def _serve(self, context, handler, *args):
        try:
            return handler(*args)
        except Refusal as refusal:
            if refusal.trailing:
                context.set_trailing_metadata(refusal.trailing)
            context.abort(refusal.code, str(refusal))
        except codec.CodecError as e:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        except Exception as e:  # a bug of ours: report it, keep serving
            LOG.exception("unexpected error")
            context.abort(grpc.StatusCode.INTERNAL, f"server error: {type(e).__name__}: {e}")

    @contextlib.contextmanager
    def _locked(self, session: Session):
        """Holds the session for one call; a second caller waits a moment, then is refused."""
        if not session.lock.acquire(timeout=BUSY_WAIT_SECONDS):
            raise busy(
                f"session {session.id} is busy with another call: a session takes one call at a time"
            )
        try:
            yield
        finally:
            session.last_used = time.monotonic()  # idle counts from the end of a call
            session.lock.release()

    # --- Make --------------------------------------------------------------------
    def Make(self, request, context):
        return self._serve(context, self._make_once, request, context)

    def _make_once(self, request: env_pb2.MakeRequest, context) -> env_pb2.MakeResponse:
        """``_make`` for a Make not seen before; a retried one (its ``make_id`` again) gets
        the session the first made, or is told to wait while the first is being made."""
        make_id = request.make_id
        if make_id:
            with self._making_lock:
                made = self.sessions.made_by(make_id)
                if made is not None:
                    return made.made
                if make_id in self._making:
                    raise busy(f"the Make {make_id} is still being made")
                self._making.add(make_id)
        try:
            return self._make(request, context)
        finally:
            with self._making_lock:
                self._making.discard(make_id)

    def _make(self, request: env_pb2.MakeRequest, context) -> env_pb2.MakeResponse:
        if request.num_envs < 1:
            raise invalid(f"num_envs must be at least 1, got {request.num_envs}")
        if request.render_mode not in ("", "rgb_array"):
            raise invalid(f"render_mode {request.render_mode!r}: valid: '' or 'rgb_array'")
        kwargs = codec.decode_json_object(request.kwargs_json, "kwargs_json")
        seed = request.seed if request.HasField("seed") else None
        check_seed(seed)
        cap = session_episode_cap(request)
        self.sessions.reserve(request.num_envs)
        envs: List[gym.Env] = []
        session_id = f"{next(self._ids)}-{secrets.token_hex(8)}"
        try:
            for _ in range(request.num_envs):
                env = self.make_env(request.env_id, request.render_mode or None, kwargs)
                envs.append(bound_episodes(env, cap))  # a client's loop always ends
            limit = time_limit(envs[0])
            # The whole answer is built before the session exists: a refusal leaves nothing.
            response = env_pb2.MakeResponse(
                session_id=session_id,
                observation_space=codec.encode_space(envs[0].observation_space),
                action_space=codec.encode_space(envs[0].action_space),
                max_episode_steps=limit if 0 <= limit < 2**31 else 0,  # 0: none to report
                metadata_json=json.dumps(codec.jsonable(dict(envs[0].metadata))),
                server_version=__version__,
            )
        except BaseException as e:
            _close_all(envs)
            self.sessions.release(request.num_envs)
            if isinstance(e, Refusal):
                raise
            if isinstance(e, codec.CodecError):
                raise invalid(f"env {request.env_id!r} cannot be served: {e}") from None
            if isinstance(e, Exception):
                raise invalid(
                    f"env {request.env_id!r} could not be made: {error_line(e, typed=True)}"
                ) from None
            raise
        if client_gave_up(context):  # nobody would ever hold or close this session
            _close_all(envs)
            self.sessions.release(request.num_envs)
            raise Refusal(grpc.StatusCode.CANCELLED, "the client gave up on this Make")
        session = Session(
            session_id, request.env_id, envs, request.autoreset, seed, response, request.make_id
        )
        self.sessions.add(session)
        LOG.info("session %s: %d x %s", session_id, len(envs), request.env_id)
        return response

    # --- Reset -------------------------------------------------------------------
    def Reset(self, request, context):
        return self._serve(context, self._reset, request)

    def _reset(self, request: env_pb2.ResetRequest) -> env_pb2.ResetResponse:
        session = self.sessions.get(request.session_id)
        options = codec.decode_json_object(request.options_json, "options_json")
        if request.HasField("seed"):
            check_seed(request.seed)
        with self._locked(session):
            seed = request.seed if request.HasField("seed") else session.seed
            session.seed = None  # Make's seed seeds only the first reset
            observations, infos = [], []
            for i, env in enumerate(session.envs):
                copy_seed = None if seed is None else seed + i
                try:
                    obs, info = env.reset(seed=copy_seed, options=options or None)
                except Exception as e:
                    session.needs_reset = True
                    raise _env_raised(session, "reset", e) from None
                observations.append(obs)
                infos.append(codec.encode_info(info))
            session.needs_reset = False
            session.ended[:] = False
            session.last_response = None
            return env_pb2.ResetResponse(
                observations=codec.encode_value(_stack(session.observation_space, observations)),
                infos_json=infos,
            )

    # --- Step --------------------------------------------------------------------
    def Step(self, request, context):
        return self._serve(context, self._step, request)

    def StepStream(self, request_iterator, context):
        # An open stream holds one of the server's threads for its whole life: beyond
        # max_streams, clients are told to use unary Step (the Python client falls back).
        with self._streams_lock:
            if self._open_streams >= self.max_streams:
                context.abort(
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                    f"this server holds its limit of {self.max_streams} open step streams: "
                    "use unary Step calls",
                )
            self._open_streams += 1
        try:
            for request in request_iterator:
                yield self._serve(context, self._step, request)
        finally:
            with self._streams_lock:
                self._open_streams -= 1

    def _step(self, request: env_pb2.StepRequest) -> env_pb2.StepResponse:
        session = self.sessions.get(request.session_id)
        with self._locked(session):
            if request.seq and request.seq == session.last_seq and session.last_response:
                return session.last_response  # a retry of a step already taken
            if request.seq and request.seq != session.last_seq + 1:
                raise Refusal(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"step seq {request.seq} is out of order: the last step was {session.last_seq}",
                )
            if session.needs_reset:
                raise Refusal(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"session {session.id} needs Reset (before the first step and after its env raised)",
                )
            n = len(session.envs)
            actions = codec.decode_value(request.actions)
            why = codec.mismatch(session.action_space, actions, batch=n, path="actions")
            if why:
                raise invalid(f"{why} (action space {session.action_space}, {n} envs)")
            if not session.autoreset and session.ended.any():
                raise Refusal(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"env copies {np.flatnonzero(session.ended).tolist()} ended: call Reset",
                )
            response = self._step_envs(
                session, codec.unstack(session.action_space, actions, n, _actions)
            )
            response.seq = request.seq
            if request.seq:
                session.last_seq = request.seq
            # Only a numbered step can be retried; an unnumbered one forgets the last answer.
            session.last_response = response if request.seq else None
            return response

    def _step_envs(self, session: Session, actions: List[Any]) -> env_pb2.StepResponse:
        n = len(session.envs)
        observations, infos, final_infos = [], [""] * n, [""] * n
        rewards = np.zeros(n, dtype=np.float64)
        terminated = np.zeros(n, dtype=bool)
        truncated = np.zeros(n, dtype=bool)
        finals = {}
        for i, (env, action) in enumerate(zip(session.envs, actions)):
            try:
                obs, rewards[i], terminated[i], truncated[i], info = env.step(action)
                if session.autoreset and (terminated[i] or truncated[i]):
                    finals[i] = obs
                    final_infos[i] = codec.encode_info(info)
                    obs, info = env.reset()
            except Exception as e:
                session.needs_reset = True
                raise _env_raised(session, "step", e) from None
            observations.append(obs)
            infos[i] = codec.encode_info(info)
        if not session.autoreset:
            session.ended |= terminated | truncated
        space = session.observation_space
        response = env_pb2.StepResponse(
            observations=codec.encode_value(_stack(space, observations)),
            rewards=codec.encode_tensor(rewards),
            terminated=codec.encode_tensor(terminated),
            truncated=codec.encode_tensor(truncated),
            infos_json=infos,
            final_infos_json=final_infos,
        )
        if finals:
            final = [finals.get(i, obs) for i, obs in enumerate(observations)]
            response.final_observations.CopyFrom(codec.encode_value(_stack(space, final)))
        return response

    # --- Render and Close ---------------------------------------------------------
    def Render(self, request, context):
        return self._serve(context, self._render, request)

    def _render(self, request: env_pb2.RenderRequest) -> env_pb2.RenderResponse:
        session = self.sessions.get(request.session_id)
        if not 0 <= request.index < len(session.envs):
            raise invalid(f"index {request.index} is not a copy: valid: 0..{len(session.envs) - 1}")
        with self._locked(session):
            env = session.envs[request.index]
            if env.render_mode != "rgb_array":
                raise Refusal(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    "this session renders nothing: make it with render_mode 'rgb_array'",
                )
            try:
                frame = env.render()
            except Exception as e:
                raise _env_raised(session, "render", e) from None
        frame = np.asarray(frame)
        if frame.dtype != np.uint8 or frame.ndim != 3:
            raise Refusal(
                grpc.StatusCode.INTERNAL,
                f"{session.env_id} rendered a {frame.dtype} array of shape {frame.shape}, "
                "not uint8 [height, width, channels]",
            )
        return env_pb2.RenderResponse(frame=codec.encode_tensor(frame))

    def Close(self, request, context):
        return self._serve(context, self._close, request)

    def _close(self, request: env_pb2.CloseRequest) -> env_pb2.CloseResponse:
        session = self.sessions.get(request.session_id)
        with self._locked(session):  # a busy session closes after its call, not during it
            if self.sessions.pop(request.session_id) is None:
                raise Refusal(grpc.StatusCode.NOT_FOUND, f"no session {request.session_id!r}")
            session.close()
        LOG.info("session %s closed", session.id)
        return env_pb2.CloseResponse()


def session_episode_cap(request: env_pb2.MakeRequest) -> int:
    """The cap on the episodes of a session's envs without a time limit of their own: the
    client's (a run's max_episode_steps), else the default of that hparam (a client from
    before the field). INVALID_ARGUMENT outside the hparam's range."""
    if not request.HasField("max_episode_steps"):
        return DEFAULT_MAX_EPISODE_STEPS
    cap = request.max_episode_steps
    if not 1 <= cap <= MAX_STEPS:
        raise invalid(f"max_episode_steps must be 1 to {MAX_STEPS}, got {cap}")
    return cap


def time_limit(env: gym.Env) -> int:
    """The steps at which ``env`` truncates its episodes: its outermost TimeLimit's (the
    cap put on it here, or its own), else its spec's; 0 if it has none."""
    layer = env
    while isinstance(layer, gym.Wrapper):
        if isinstance(layer, gym.wrappers.TimeLimit):
            return layer._max_episode_steps  # no public name in Gymnasium
        layer = layer.env
    spec = env.spec
    return (spec.max_episode_steps or 0) if spec is not None else 0


def check_seed(seed: Optional[int]) -> None:
    """Gymnasium seeds are non-negative: INVALID_ARGUMENT otherwise."""
    if seed is not None and seed < 0:
        raise invalid(f"seed must be non-negative, got {seed}")


def _close_all(envs: List[gym.Env]) -> None:
    for env in envs:
        try:
            env.close()
        except Exception:
            pass


def _env_raised(session: Session, during: str, error: Exception) -> Refusal:
    LOG.warning("session %s: %s raised during %s: %s", session.id, session.env_id, during, error)
    return Refusal(
        grpc.StatusCode.INTERNAL,
        f"env {session.env_id} raised during {during}: {error_line(error, typed=True)}; "
        "Reset the session to go on",
    )


def _stack(space: gym.Space, items: List[Any]) -> Any:
    """Per-copy samples of ``space`` stacked on a new first axis (tuples and dicts per leaf;
    ``codec.unstack`` is the inverse)."""
    if isinstance(space, gym.spaces.Tuple):
        return tuple(_stack(s, [item[i] for item in items]) for i, s in enumerate(space.spaces))
    if isinstance(space, gym.spaces.Dict):
        return {k: _stack(s, [item[k] for item in items]) for k, s in space.spaces.items()}
    return np.stack([np.asarray(item, dtype=space.dtype) for item in items])


def _actions(space: gym.Space, array: np.ndarray) -> List[Any]:
    """One leaf's actions per copy, in the space's dtype; Discrete ones as Python ints."""
    array = array.astype(space.dtype, copy=False)
    if isinstance(space, gym.spaces.Discrete):
        return [int(a) for a in array]
    return list(array)


# --- authentication -----------------------------------------------------------------
class TokenCheck(grpc.ServerInterceptor):
    """Refuses calls without ``authorization: Bearer <token>`` (health checks excepted,
    so that Kubernetes' gRPC probes work)."""

    def __init__(self, token: str):
        self._expected = f"Bearer {token}".encode()

        def refuse(request, context):
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong auth token")

        self._refusal = grpc.unary_unary_rpc_method_handler(refuse)
        self._stream_refusal = grpc.stream_stream_rpc_method_handler(
            lambda requests, context: refuse(None, context)
        )

    def intercept_service(self, continuation, handler_call_details):
        if handler_call_details.method.startswith(HEALTH_PREFIX):
            return continuation(handler_call_details)
        sent = dict(handler_call_details.invocation_metadata).get("authorization", "")
        if hmac.compare_digest(sent.encode(), self._expected):
            return continuation(handler_call_details)
        if handler_call_details.method.endswith("/StepStream"):
            return self._stream_refusal
        return self._refusal


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


# --- the command ---------------------------------------------------------------------
# Upper limits of the size flags: far above what one server process holds (each session
# may hold a thread, each env its memory); they turn a typo into an error, not a crash.
MOST_SESSIONS = 4096
MOST_ENVS = 65_536
MOST_MESSAGE_BYTES = 2**31 - 1  # gRPC's message sizes are 32-bit signed
MOST_IDLE_SECONDS = 7 * 24 * 3600.0


def build_parser() -> argparse.ArgumentParser:
    parser = command_line.OneLineParser(
        prog="python -m rl.envs.remote.serve",
        description="Serves rl and Gymnasium envs over gRPC (rl/envs/remote/env.proto).",
    )
    parser.add_argument(
        "--env",
        required=True,
        help="comma-separated env ids to serve: registered rl envs or Gymnasium ids; * serves any",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument(
        "--port", type=int_in_range(0, 65535), default=50051, help="0 picks a free port"
    )
    parser.add_argument(
        "--token",
        default=None,
        help=f"auth token clients must send (default: ${TOKEN_VARIABLE}); required off loopback",
    )
    parser.add_argument("--tls_cert", default=None, help="PEM certificate chain: serve TLS")
    parser.add_argument("--tls_key", default=None, help="PEM private key for --tls_cert")
    # The Limits, each flag with its range (default: the Limits' own).
    for name, reader, help_text in [
        ("max_sessions", int_in_range(1, MOST_SESSIONS), "sessions open at once"),
        ("max_envs_per_session", int_in_range(1, MOST_ENVS), "env copies one session holds"),
        ("max_total_envs", int_in_range(1, MOST_ENVS), "env copies all sessions hold"),
        (
            "idle_timeout",
            float_in_range(0.1, MOST_IDLE_SECONDS),
            "seconds without a call before a session is closed",
        ),
        (
            "max_message_bytes",
            int_in_range(1024, MOST_MESSAGE_BYTES),
            "largest request or response; bigger ones get RESOURCE_EXHAUSTED",
        ),
    ]:
        default = getattr(Limits(), name)
        parser.add_argument(
            f"--{name}", type=reader, default=default, help=f"{help_text} (default {default})"
        )
    parser.add_argument(
        "--threads",
        type=int_in_range(RESERVED_THREADS + 1, MOST_SESSIONS + RESERVED_THREADS),
        default=None,
        help=f"calls served at once (default --max_sessions + {RESERVED_THREADS}: an open step "
        "stream holds a thread)",
    )
    parser.add_argument(
        "--plugins",
        action="append",
        default=[],
        help="module to import first that registers your envs (repeatable), as in train.py",
    )
    return parser


class ServeError(ValueError):
    """Bad flags for the server: one line, exit code 2."""


def check_args(args: argparse.Namespace) -> None:
    try:
        plugins.load(args.plugins)
    except PluginError as e:
        raise ServeError(str(e)) from None
    # The numbers' ranges are the parser's (build_parser).
    if args.token is not None:
        try:
            check_token(args.token, "--token")
        except ValueError as e:
            raise ServeError(str(e)) from None
    if (args.tls_cert is None) != (args.tls_key is None):
        raise ServeError("--tls_cert and --tls_key go together")
    for path in (args.tls_cert, args.tls_key):
        if path is not None and not os.path.isfile(path):
            raise ServeError(f"no such file: {path}")
    ids = [e.strip() for e in args.env.split(",") if e.strip()]
    if not ids:
        raise ServeError("--env names no env: give ids separated by commas, or *")
    for env_id in ids:
        if "?" in env_id:
            raise ServeError(
                f"--env {env_id}: serve the id alone; clients pass keyword arguments in "
                "their URL (grpc://host:port/ID?key=value)"
            )
        if env_id != ANY_ENV:
            try:
                check_env_name(env_id)
                multi_agent = is_multi_agent(env_id)
            except Exception as e:  # UnknownNameError, HParamsError: both one line
                raise ServeError(error_line(e)) from None
            if multi_agent:
                raise ServeError(single_agent_only(env_id))
    if not is_loopback(args.host) and not args.token:
        raise ServeError(
            f"--host {args.host} is reachable from other machines: give an auth token "
            f"with --token or ${TOKEN_VARIABLE} (or bind 127.0.0.1)"
        )


def start_server(
    env_ids: Sequence[str],
    host: str = "127.0.0.1",
    port: int = 0,
    token: Optional[str] = None,
    limits: Limits = Limits(),
    threads: Optional[int] = None,
    tls: Optional[tuple] = None,
    keepalive_seconds: float = codec.KEEPALIVE_SECONDS,
    keepalive_timeout_seconds: float = codec.KEEPALIVE_TIMEOUT_SECONDS,
):
    """Starts serving in background threads; returns (grpc server, port, EnvService).

    Args:
      env_ids: ids it serves ("*" = any).
      host: address to bind.
      port: 0 picks a free one.
      token: auth token clients must send, or None for none.
      limits: session, env and message limits.
      threads: calls served at once (default: max_sessions + RESERVED_THREADS, so every
        session can hold a step stream).
      tls: (private key PEM bytes, certificate chain PEM bytes), or None for plaintext.
      keepalive_seconds: a connection silent this long is pinged.
      keepalive_timeout_seconds: a ping unanswered this long closes its connection.
    """
    # Threads: one per open stream, plus RESERVED_THREADS for unary calls and health checks.
    threads = threads or limits.max_sessions + RESERVED_THREADS
    service = EnvService(env_maker(env_ids), limits, max_streams=max(threads - RESERVED_THREADS, 1))
    options = [
        ("grpc.max_receive_message_length", limits.max_message_bytes),
        ("grpc.max_send_message_length", limits.max_message_bytes),
        ("grpc.so_reuseport", 0),  # a second server on a taken port fails instead of sharing
        *codec.keepalive_options(keepalive_seconds, keepalive_timeout_seconds),
        # Clients ping to notice a vanished server; tolerate that.
        ("grpc.http2.min_recv_ping_interval_without_data_ms", int(MIN_CLIENT_PING_SECONDS * 1000)),
        ("grpc.http2.max_ping_strikes", 0),
    ]
    interceptors = [TokenCheck(token)] if token else []
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=threads, thread_name_prefix="env-server"),
        interceptors=interceptors,
        options=options,
        maximum_concurrent_rpcs=threads * 4,
    )
    env_pb2_grpc.add_EnvServiceServicer_to_server(service, server)
    health_servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    address = f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"
    try:  # grpcio before 1.59 returns 0, later ones raise RuntimeError
        if tls is None:
            bound = server.add_insecure_port(address)
        else:
            bound = server.add_secure_port(address, grpc.ssl_server_credentials([tls]))
    except RuntimeError:
        bound = 0
    if bound == 0:
        why = "is the port taken, or is --host an address of this machine?"
        if tls is not None:
            why = "is the port taken, or are --tls_cert and --tls_key not a pair?"
        raise ServeError(f"cannot bind {address}: {why}")
    server.start()
    health_servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    health_servicer.set("rl.envs.remote.EnvService", health_pb2.HealthCheckResponse.SERVING)

    def expire_forever():
        while True:
            time.sleep(max(limits.idle_timeout / 4, 0.05))
            service.sessions.expire_idle()

    threading.Thread(target=expire_forever, daemon=True, name="expire-idle").start()
    return server, bound, service


SERVING_LINE = re.compile(r"^serving .* on grpcs?://(?P<host>\S+):(?P<port>\d+) ")


def launch(
    env_ids: str,
    *args: str,
    python: str = sys.executable,
    env: Optional[Dict[str, str]] = None,
    timeout: float = 60.0,
    port: int = 0,
    log: Optional[str] = None,
):
    """Starts ``python -m rl.envs.remote.serve --env env_ids --port port *args`` as a
    child process and waits for its serving line; returns (process, port).

    Args:
      env_ids: the --env value.
      *args: more serve flags.
      python: the interpreter (another virtualenv's, to serve from there).
      env: the child's environment (default: this one's).
      timeout: seconds to wait for the serving line.
      port: the port to bind (0: any free one).
      log: a file the server's log (stderr) is appended to (default: a temporary one).

    Raises:
      RuntimeError: with the server's output if it exited or said nothing in time.
    """
    command = [python, "-m", "rl.envs.remote.serve", "--env", env_ids, "--port", str(port), *args]
    # The log goes to a file: an unread pipe would fill up and block the server.
    stderr = open(log, "a+") if log else tempfile.TemporaryFile(mode="w+")
    start = stderr.tell()
    try:
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=stderr, text=True, env=env
        )
    except OSError:
        stderr.close()
        raise
    lines: List[str] = []
    reader = threading.Thread(target=lambda: lines.append(process.stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    match = SERVING_LINE.match(lines[0]) if lines else None
    if match is None:
        process.kill()
        process.wait()
        stderr.seek(start)
        said = (lines[0] if lines else "") + stderr.read()
        stderr.close()
        raise RuntimeError(f"env server did not start ({' '.join(command)}): {said.strip()}")
    stderr.close()  # the server writes through its own copy of the descriptor
    return process, int(match.group("port"))


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)  # bad flags: one line, exit code 2
    try:
        if args.token is None:
            try:
                args.token = token_from_environment()
            except ValueError as e:
                raise ServeError(str(e)) from None
        check_args(args)
        tls = None
        if args.tls_cert:
            with open(args.tls_cert, "rb") as cert, open(args.tls_key, "rb") as key:
                tls = (key.read(), cert.read())
            if PEM_CERTIFICATE not in tls[1]:
                raise ServeError(f"--tls_cert {args.tls_cert} holds no PEM certificate")
            if b"PRIVATE KEY-----" not in tls[0]:
                raise ServeError(f"--tls_key {args.tls_key} holds no PEM private key")
        limits = Limits(
            args.max_sessions,
            args.max_envs_per_session,
            args.max_total_envs,
            args.idle_timeout,
            args.max_message_bytes,
        )
        env_ids = [e.strip() for e in args.env.split(",") if e.strip()]
        server, port, service = start_server(
            env_ids, args.host, args.port, args.token, limits, args.threads, tls
        )
    except ServeError as e:
        print(f"{parser.prog}: error: {one_line(str(e))}", file=sys.stderr)
        return command_line.EXIT_BAD_INPUT
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    stop_signals: List[int] = []
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda signum, _: stop_signals.append(signum))
    scheme = "grpcs" if tls else "grpc"
    # Tests and scripts read this line to learn the port (with --port 0).
    print(
        f"serving {', '.join(env_ids)} on {scheme}://{args.host}:{port} "
        f"({'token required' if args.token else 'no token'})",
        flush=True,
    )
    # Python runs a handler only in the main thread, and a signal the kernel hands to one of
    # grpc's threads does not wake a main thread blocked on a lock: an Event.wait() here
    # missed SIGTERM about once in 40 stops on a loaded machine. Sleeping in short steps
    # bounds the delay instead. (The handler only appends: setting an Event from it could
    # deadlock on the Event's own lock.)
    while not stop_signals:
        time.sleep(STOP_POLL_SECONDS)
    # Bounded: grpcio can leave a call that failed to parse unfinished, and an unbounded
    # wait would then ignore SIGTERM for ever.
    server.stop(grace=2.0).wait(timeout=5.0)
    service.sessions.close_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
