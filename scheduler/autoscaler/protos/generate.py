"""Generate the Python code of the gRPC expander's and the externalgrpc cloud provider's .proto
files: `make protos`, or `python -m scheduler.autoscaler.protos.generate [OUT_DIR]` from the
repository root.

The *_pb2.py/.pyi files are committed; a test regenerates them into a temporary directory with
the pinned grpcio-tools (pyproject.toml's `dev` extra) and checks they are byte for byte the same.
"""

from __future__ import annotations

import sys
from pathlib import Path

from common.protoc import ROOT, protoc

PROTO_DIR = Path(__file__).resolve().parent
PROTOS = (
    "k8s_resource.proto", "k8s_meta_v1.proto", "k8s_core_v1.proto", "expander.proto",
    "externalgrpc.proto",
)


def generate(out_dir: Path = ROOT) -> None:
    protoc([PROTO_DIR / name for name in PROTOS], out_dir)


if __name__ == "__main__":
    generate(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT)
