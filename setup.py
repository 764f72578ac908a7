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
        # classic-control brings pygame for rgb_array rendering.
        "gymnasium[classic-control]>=1.1,<2",
        "numpy>=1.26",
        "absl-py>=2.0",
        "opencv-python-headless>=4.8",
        "imageio>=2.31",
        "imageio-ffmpeg>=0.5",
        "matplotlib>=3.8",
    ],
    extras_require={
        "test": ["pytest>=8", "pytest-timeout>=2.3", "ruff>=0.6"],
    },
)
