"""remote: envs served over gRPC, from another process, virtualenv, language or machine.

``env.proto`` is the protocol (``env_pb2*.py`` are generated from it by
``codegen.py``); ``codec.py`` turns arrays, spaces and infos into its messages;
``serve.py`` is the server (``python -m rl.envs.remote.serve``); ``client.py``
holds the Gymnasium ``Env`` and ``VectorEnv`` clients that ``--env
grpc://host:port/ID`` builds; ``address.py`` parses those URLs. Importing this
package loads neither grpcio nor TensorFlow.
"""
