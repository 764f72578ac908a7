"""remote: envs served over gRPC, from another process, virtualenv, language or machine.

``env.proto`` is the protocol (``env_pb2*.py`` are generated from it by
``codegen.py``); ``codec.py`` turns arrays, spaces and infos into its messages;
``serve.py`` is the server (``python -m rl.envs.remote.serve``); ``client.py``
holds the Gymnasium ``Env`` and ``VectorEnv`` clients that ``--env
grpc://host:port/ID`` builds; ``address.py`` parses those URLs. Importing this
package loads neither grpcio nor TensorFlow.
"""

import os

# Set before any module here imports grpc. Every child process rl starts execs a program
# of its own (actor processes, ffmpeg), so gRPC's fork handlers help none of them, and in
# grpcio 1.80-1.85 they can kill a child between fork and exec while a channel is open
# (grpc/grpc#43055: ffmpeg died so, reading a test video, in this project's suite).
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
