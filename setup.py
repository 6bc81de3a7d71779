"""rlf: a PyTorch reinforcement-learning framework in the mould of ALF."""

import re

from setuptools import find_packages, setup

# One place for the version: rlf.__version__ (importing rlf here would need its dependencies).
VERSION = re.search(r'^__version__ = "([^"]+)"', open("rlf/__init__.py", encoding="utf-8").read(),
                    re.M).group(1)

setup(
    name="rlf",
    version=VERSION,
    description="A PyTorch reinforcement-learning framework in the mould of ALF",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=find_packages(include=["rlf", "rlf.*"]),
    install_requires=[
        # A lower bound only: CI installs the local CPU build torch==2.13.0 first.
        "torch>=2.3",
        "numpy>=1.24",
        "gymnasium>=1.0",
        "ale-py>=0.11",
        "opencv-python-headless>=4.8",
        "gin-config>=0.5",
        "absl-py>=2.0",
        "tensorboard>=2.14",
        # optree 0.18-0.20 flatten ~25-45% slower than 0.17 on this machine (bench/nest_bench.py).
        "optree>=0.14,<0.18",
        "tqdm>=4.66",
        # rlf.bin.suite's learning-curve plots.
        "matplotlib>=3.7",
    ],
    extras_require={
        # playwright drives Debian's chromium (.ci/run installs it) in the docs-site test.
        "test": ["pytest>=7.4", "pytest-xdist>=3.5", "playwright>=1.40"],
        # The linter and the type checker of .ci/run (rule sets in pyproject.toml).
        "lint": ["ruff>=0.6", "mypy>=1.10"],
        # The documentation site: mkdocs build --strict (mkdocs.yml).
        # (ruff formats the API signatures to the column)
        "docs": ["mkdocs>=1.6", "mkdocs-material>=9.5", "mkdocstrings[python]>=0.26",
                 "ruff>=0.6"],
        "ray": ["ray[default]>=2.9"],
        # rlf.bin.tune and rlf.bin.suite --backend tune: experiments as Ray Tune trials
        # (ray.tune.RunConfig, CheckpointConfig and FailureConfig since 2.43).
        "tune": ["ray[default,tune]>=2.43"],
        # TrainerConfig.tracker = 'mlflow' / 'wandb'.
        "mlflow": ["mlflow>=2.9"],
        "wandb": ["wandb>=0.16"],
        # gymnasium's MuJoCo environments (HalfCheetah-v5, ...) for the SAC and PPO confs.
        "mujoco": ["gymnasium[mujoco]>=1.0", "mujoco>=3.1"],
        # Policy.export / rlf.bin.export to ONNX (torch's exporter needs onnx and onnxscript);
        # onnxruntime runs the exported file in the tests.
        "export": ["onnx>=1.16", "onnxscript>=0.3", "onnxruntime>=1.18"],
        # rlf.bin.play --record: gymnasium's classic-control renderer and GIF writing.
        "play": ["pygame>=2.1", "pillow>=9.0"],
        # rlf.bin.suite's and rlf.bin.compare's aggregates with confidence intervals (seaborn:
        # their plots' palette); arch, which rliable bootstraps with, fails with pandas 3.
        "suite": ["rliable>=1.2.0", "seaborn>=0.11", "pandas>=1.5,<3"],
        # Peers measured by bench/replay_bench.py.
        "bench": ["stable-baselines3>=2.3", "torchrl>=0.6", "psutil>=5.9", "matplotlib>=3.7"],
    },
)
