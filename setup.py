"""Installs rl and the libraries it is tested with."""

from setuptools import find_packages, setup

setup(
    name="rl",
    version="0.1.0",
    description="Modular reinforcement learning on TensorFlow 2, Keras 3 and Gymnasium.",
    long_description=open("README.md").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10,<3.14",
    packages=find_packages(include=["rl", "rl.*"]),
    install_requires=[
        "tensorflow>=2.21,<2.22",
        "tensorflow-probability>=0.25,<0.26",
        # TFP needs the Keras 2 package on TF >= 2.16.
        "tf-keras>=2.21,<2.22",
        # TensorFlow 2.21 no longer installs TensorBoard; rl writes its event files and
        # the README's `tensorboard --logdir runs` needs the command.
        "tensorboard>=2.21,<2.22",
        # classic-control brings pygame for rgb_array rendering.
        "gymnasium[classic-control]>=1.1,<2",
        # rl/agents imports Keras 3 (TensorFlow installs it too, but we use it directly).
        "keras>=3.10",
        # The screen viewer and Gymnasium's classic-control renderer draw with pygame-ce.
        "pygame-ce>=2.5",
        "numpy>=1.26",
        "absl-py>=2.0",
        "opencv-python-headless>=4.8",
        "imageio>=2.31",
        "imageio-ffmpeg>=0.5",
        "matplotlib>=3.8",
        # The statistics over seeds (IQM, stratified bootstrap intervals, probability of
        # improvement, performance profiles; Agarwal et al. 2021), from the field's library.
        "rliable>=1.2,<1.3",
        # rliable 1.2 allows at most arch 7.2, which fails to import with pandas 3.
        "pandas<3",
    ],
    extras_require={
        # werkzeug: tests serve TensorBoard's image plugin through its WSGI test client.
        "test": [
            "pytest>=8",
            "pytest-timeout>=2.3",
            # the suite runs on two workers (README's test command): most of it is train.py
            # subprocesses that each keep one core busy.
            "pytest-xdist>=3.6",
            "ruff>=0.6",
            # tests/test_layers.py: the import layers of .importlinter, and grimp (import-linter's
            # graph library) to name every import of a circle.
            "import-linter>=2.1,<3",
            "grimp>=3.5,<4",
            "hypothesis>=6.100",
            "werkzeug>=3.0",
            # tests read GIF frames back with Pillow (imageio's GIF plugin uses it too).
            "pillow>=10",
            # tests/test_deploy.py checks deploy/'s manifests without a cluster: Kubernetes'
            # schemas (kubernetes-validate) and our schema of KubeRay's fields (jsonschema).
            "kubernetes-validate>=1.33",
            "jsonschema>=4.20",
            "pyyaml>=6",
            # tests/test_remote_env.py checks env_pb2*.py against env.proto by regenerating
            # them: the exact version that wrote them, since each patch release writes its
            # own number into env_pb2_grpc.py as the oldest grpcio the module accepts.
            "grpcio-tools==1.85.1",
        ],
        # Gymnasium families with their own dependencies (`--list` marks them).
        "box2d": ["gymnasium[box2d]>=1.1,<2"],
        # Atari games (`--env ALE/Breakout-v5`): ale-py 0.12 bundles its ROMs.
        "atari": ["ale-py>=0.12,<0.13"],
        "mujoco": ["gymnasium[mujoco]>=1.1,<2"],
        # Envs served over gRPC (`--env grpc://host:port/ID`, python -m rl.envs.remote.serve);
        # protobuf 7 is what TensorFlow 2.21 uses too.
        "remote": [
            "grpcio>=1.85,<1.86",
            "grpcio-health-checking>=1.85,<1.86",
            "protobuf>=7.35,<8",
        ],
        # --sys ray: Ray core only (RLlib has dropped TensorFlow; rl does not use it).
        "ray": ["ray[default]>=2.60,<2.61"],
        # Two-player games (rl/games) and tournaments (python -m rl.tournament): Nash by linprog.
        "games": ["pettingzoo>=1.27,<1.28", "scipy>=1.11"],
        # Multi-agent envs (rl/envs/parallel.py): PettingZoo's Parallel API, MPE's envs (mpe2),
        # SISL's multiwalker (Box2D) and pursuit.
        "multiagent": ["pettingzoo>=1.27,<1.28", "mpe2>=1.1.1,<1.2", "gymnasium[box2d]>=1.1,<2"],
        # python -m rl.search: hyperparameter search (docs/guides/search.md).
        "search": ["optuna>=5.0,<6"],
        # --tracking mlflow (rl/tracking.py): MLflow's client, and its SQLite store's SQLAlchemy and Alembic.
        "tracking": ["mlflow-skinny>=3.17,<4", "sqlalchemy>=1.4,<3", "alembic>=1.11,<2"],
        # Peer for scripts/benchmark.py --peer: Stable-Baselines3 on PyTorch's CPU build.
        "bench": ["torch==2.13.0", "stable-baselines3==2.9.2"],
        # The documentation site: mkdocs build --strict (mkdocs.yml; tests/test_docs.py runs it).
        "docs": ["mkdocs>=1.6,<2", "mkdocs-material>=9.5,<10", "mkdocstrings-python>=2.0,<3"],
    },
)
