"""Regenerates env_pb2.py and env_pb2_grpc.py from env.proto (needs grpcio-tools).

    python -m rl.envs.remote.codegen [--check]

The generated modules are committed so that serving or using a remote env needs
only grpcio and protobuf; ``--check`` (and tests/test_remote_env.py) fails when
they no longer match env.proto.
"""

import argparse
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
PROTO = "rl/envs/remote/env.proto"
GENERATED = ("env_pb2.py", "env_pb2_grpc.py")


def generate(output_root: str) -> None:
    """Writes the generated modules under ``output_root``/rl/envs/remote/."""
    from grpc_tools import protoc

    os.makedirs(os.path.join(output_root, os.path.dirname(PROTO)), exist_ok=True)
    args = ["protoc", f"-I{ROOT}", f"--python_out={output_root}"]
    args += [f"--grpc_python_out={output_root}", os.path.join(ROOT, PROTO)]
    if protoc.main(args) != 0:
        raise RuntimeError(f"protoc failed on {PROTO}")


def stale_modules() -> list:
    """The committed generated modules that differ from what env.proto generates now."""
    with tempfile.TemporaryDirectory() as tmp:
        generate(tmp)
        stale = []
        for name in GENERATED:
            with open(os.path.join(tmp, os.path.dirname(PROTO), name), "rb") as f:
                fresh = f.read()
            path = os.path.join(HERE, name)
            if not os.path.exists(path) or open(path, "rb").read() != fresh:
                stale.append(name)
        return stale


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report stale modules")
    args = parser.parse_args()
    if args.check:
        stale = stale_modules()
        if stale:
            print(f"stale: {', '.join(stale)}: run python -m rl.envs.remote.codegen")
            return 1
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        generate(tmp)
        for name in GENERATED:
            shutil.copy(os.path.join(tmp, os.path.dirname(PROTO), name), os.path.join(HERE, name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
