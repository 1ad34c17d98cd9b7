"""Generate the Python code of the project's .proto files: `make protos`, or
`python -m agent.protos.generate [OUT_DIR]` from the repository root (the agent's PodResources
client; scheduler/autoscaler/protos/generate.py runs `protoc` below for the gRPC expander).

The *_pb2.py/.pyi files are committed; a test regenerates them into a temporary directory with
the pinned grpcio-tools (pyproject.toml's `dev` extra) and checks they are byte for byte the same.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROTO_DIR = Path(__file__).resolve().parent
PROTOS = ("podresources.proto",)


def protoc(protos: Sequence[Path], out_dir: Path) -> None:
    """Python messages (`_pb2.py`) and their type stubs (`_pb2.pyi`) for .proto files under ROOT,
    named by their path from ROOT (so they import each other as the packages they live in)."""
    from grpc_tools import protoc as tool  # the dev extra's grpcio-tools

    relative = [str(path.relative_to(ROOT)) for path in protos]
    args = ["protoc", f"-I{ROOT}", f"--python_out={out_dir}", f"--pyi_out={out_dir}", *relative]
    if tool.main(args) != 0:
        raise SystemExit(f"protoc failed: {' '.join(args)}")


def generate(out_dir: Path = ROOT) -> None:
    protoc([PROTO_DIR / name for name in PROTOS], out_dir)


if __name__ == "__main__":
    generate(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT)
