"""``grpc://host:port/ENV_ID?key=value`` URLs naming an env on an env server.

``grpcs://`` asks for TLS. Query parameters become keyword arguments of the
server's ``gymnasium.make`` (values parsed as JSON where they parse:
``?continuous=true&gravity=-9.5``). Secrets never go in the URL (it is saved
in hparams.json): the auth token comes from the ``RL_ENV_SERVER_TOKEN``
environment variable.
"""

import os
import urllib.parse
from typing import Any, Dict, NamedTuple, Optional

from rl.files import JSONNestingError, loads_json

SCHEMES = ("grpc", "grpcs")
TOKEN_VARIABLE = "RL_ENV_SERVER_TOKEN"
PEM_CERTIFICATE = b"-----BEGIN CERTIFICATE-----"  # how a PEM certificate file starts a block
DEFAULT_PORT = 50051


class RemoteAddress(NamedTuple):
    target: str  # host:port as grpc dials it
    env_id: str
    tls: bool
    kwargs: Dict[str, Any]


def check_token(token: str, source: str) -> str:
    """``token`` if it can be an auth token, else ValueError naming ``source``.

    It is sent as gRPC metadata (``authorization: Bearer <token>``), which holds printable
    ASCII; a blank one (``--token "   "``, an unset shell variable) protects nothing.

    Args:
      token: the token.
      source: where it came from, as the user wrote it (``--token``, ``$RL_ENV_SERVER_TOKEN``).
    """
    if not token.strip():
        raise ValueError(f"{source} is blank: give a token of letters, digits and symbols")
    if token != token.strip() or not all(" " <= char <= "~" for char in token):
        raise ValueError(
            f"{source} holds whitespace at its ends or characters other than printable "
            "ASCII, which gRPC metadata cannot carry"
        )
    return token


def token_from_environment() -> Optional[str]:
    """The token in ``$RL_ENV_SERVER_TOKEN`` (checked), or None when it is unset or empty."""
    token = os.environ.get(TOKEN_VARIABLE)
    return check_token(token, f"${TOKEN_VARIABLE}") if token else None


def is_remote(name: str) -> bool:
    """Whether an env name is an env server URL."""
    return isinstance(name, str) and name.split("://", 1)[0] in SCHEMES and "://" in name


def query_kwargs(query: str) -> Dict[str, Any]:
    """``key=value&...`` as keyword arguments: values parsed as JSON where they parse
    (``true``, ``-9.5``, ``[1, 2]``), else kept as text.

    Raises:
      ValueError: a part without ``=``, an empty key, a key given twice, or JSON nested
        too deeply.
    """
    kwargs: Dict[str, Any] = {}
    for part in query.split("&") if query else []:
        key, equals, value = part.partition("=")
        key, value = urllib.parse.unquote_plus(key), urllib.parse.unquote_plus(value)
        if not equals or not key:
            raise ValueError(f"keyword argument {part!r} must be key=value")
        if key in kwargs:
            raise ValueError(f"keyword argument {key!r} is given twice")
        try:
            kwargs[key] = loads_json(value)
        except JSONNestingError as e:
            raise ValueError(f"keyword argument {key!r} is {e}") from None
        except ValueError:
            kwargs[key] = value
    return kwargs


def parse(url: str) -> RemoteAddress:
    """The parts of ``grpc[s]://host[:port]/ENV_ID[?key=value&...]``.

    Raises:
      ValueError: with what a valid URL looks like.
    """
    form = "grpc://host:port/ENV_ID (or grpcs:// for TLS)"
    if not url.isprintable():  # urlsplit drops newlines and tabs without a word
        raise ValueError(f"env URL {url!r} holds a control character (a newline, a tab): {form}")
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError as e:  # a bracketed host that is no IPv6 address, or no closing ]
        raise ValueError(
            f"env URL {url!r} has an invalid host ({e}): an IPv6 address is written in "
            f"brackets, e.g. grpc://[::1]:{DEFAULT_PORT}/ENV_ID; {form}"
        ) from None
    if parts.scheme not in SCHEMES:
        raise ValueError(f"env URL {url!r} must start with grpc:// or grpcs://: {form}")
    try:
        port = parts.port or DEFAULT_PORT
    except ValueError:
        raise ValueError(f"env URL {url!r} has an invalid port: {form}") from None
    if not parts.hostname:
        raise ValueError(f"env URL {url!r} names no host: {form}")
    env_id = urllib.parse.unquote(parts.path.lstrip("/"))
    if not env_id:
        raise ValueError(f"env URL {url!r} names no env after the address: {form}")
    if parts.username or parts.password:
        raise ValueError(
            f"env URL {url!r} holds credentials: pass the token in ${TOKEN_VARIABLE} instead"
        )
    try:
        kwargs = query_kwargs(parts.query)
    except ValueError as e:
        raise ValueError(f"env URL {url!r}: {e}") from None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return RemoteAddress(f"{host}:{port}", env_id, parts.scheme == "grpcs", kwargs)
