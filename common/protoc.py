"""`protoc` for the project's .proto files, named by their path from the repository root:
agent/protos/generate.py (the agent's PodResources client) and
scheduler/autoscaler/protos/generate.py (the gRPC expander) run it (`make protos`).

The *_pb2.py/.pyi files are committed; a test regenerates them into a temporary directory with
the pinned grpcio-tools (pyproject.toml's `dev` extra) and checks they are byte for byte the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def protoc(protos: Sequence[Path], out_dir: Path) -> None:
    """Python messages (`_pb2.py`) and their type stubs (`_pb2.pyi`) for .proto files under ROOT,
    named by their path from ROOT (so they import each other as the packages they live in)."""
    from grpc_tools import protoc as tool  # the dev extra's grpcio-tools

    relative = [str(path.relative_to(ROOT)) for path in protos]
    # grpcio-tools' copy of protobuf's well-known types (google/protobuf/timestamp.proto, …)
    well_known = Path(tool.__file__).resolve().parent / "_proto"
    args = ["protoc", f"-I{ROOT}", f"-I{well_known}", f"--python_out={out_dir}", f"--pyi_out={out_dir}", *relative]
    if tool.main(args) != 0:
        raise SystemExit(f"protoc failed: {' '.join(args)}")

