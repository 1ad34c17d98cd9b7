"""Generate the Python code of the agent's .proto files (the kubelet's PodResources client):
`make protos`, or `python -m agent.protos.generate [OUT_DIR]` from the repository root.

The *_pb2.py/.pyi files are committed; a test regenerates them into a temporary directory with
the pinned grpcio-tools (pyproject.toml's `dev` extra) and checks they are byte for byte the same.
"""

from __future__ import annotations

import sys
from pathlib import Path

from common.protoc import ROOT, protoc

PROTO_DIR = Path(__file__).resolve().parent
PROTOS = ("podresources.proto",)


def generate(out_dir: Path = ROOT) -> None:
    protoc([PROTO_DIR / name for name in PROTOS], out_dir)


if __name__ == "__main__":
    generate(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT)
