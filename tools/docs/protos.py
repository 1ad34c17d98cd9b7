"""The gRPC contracts for docs/reference/contracts.md, read from the .proto files by protoc itself
(grpcio-tools, as `make protos` runs it) with their comments (`--include_source_info`)."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from google.protobuf import descriptor_pb2

from tools.docs.markdown import code, table

REPO = Path(__file__).resolve().parents[2]
# FieldDescriptorProto.Type → its .proto spelling
_SCALARS = {
    descriptor_pb2.FieldDescriptorProto.TYPE_DOUBLE: "double", descriptor_pb2.FieldDescriptorProto.TYPE_FLOAT: "float",
    descriptor_pb2.FieldDescriptorProto.TYPE_INT64: "int64", descriptor_pb2.FieldDescriptorProto.TYPE_UINT64: "uint64",
    descriptor_pb2.FieldDescriptorProto.TYPE_INT32: "int32", descriptor_pb2.FieldDescriptorProto.TYPE_BOOL: "bool",
    descriptor_pb2.FieldDescriptorProto.TYPE_STRING: "string", descriptor_pb2.FieldDescriptorProto.TYPE_BYTES: "bytes",
    descriptor_pb2.FieldDescriptorProto.TYPE_UINT32: "uint32",
}
# Paths in a FileDescriptorProto (descriptor.proto's field numbers), for its comments
_MESSAGE, _SERVICE, _FIELD, _METHOD, _NESTED, _SYNTAX = 4, 6, 2, 2, 3, 12


@dataclass(frozen=True)
class Contract:
    proto: str  # path from the repository root
    role: str  # who serves it and who calls it
    implemented: Callable[[str], bool] | None = None  # method name → answered by kubejoule (None: a client)


def descriptor(proto: str) -> descriptor_pb2.FileDescriptorProto:
    from grpc_tools import protoc

    well_known = Path(protoc.__file__).resolve().parent / "_proto"
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "set.pb"
        args = ["protoc", f"-I{REPO}", f"-I{well_known}", "--include_source_info", f"--descriptor_set_out={out}", proto]
        if protoc.main(args) != 0:
            raise ValueError(f"protoc failed on {proto}")
        files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    return files.file[0]


def _comments(fd: descriptor_pb2.FileDescriptorProto) -> dict[tuple[int, ...], str]:
    found = {}
    for location in fd.source_code_info.location:
        text = " ".join(" ".join(part.split()) for part in (*location.leading_detached_comments,
                                                              location.leading_comments, location.trailing_comments)
                        if part.strip())
        if text:
            found[tuple(location.path)] = text
    return found


def _short(name: str, package: str) -> str:
    """A type's name as its own file writes it: without the leading dot and the file's package."""
    return name.lstrip(".").removeprefix(package + ".")


def _field_type(field: descriptor_pb2.FieldDescriptorProto, maps: dict[str, descriptor_pb2.DescriptorProto],
                package: str) -> str:
    name = _SCALARS[field.type] if field.type in _SCALARS else _short(field.type_name, package)
    if field.type_name and field.type_name.lstrip(".") in maps:
        entry = maps[field.type_name.lstrip(".")]
        key, value = entry.field
        return f"map<{_field_type(key, maps, package)}, {_field_type(value, maps, package)}>"
    repeated = field.label == descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED
    return f"repeated {name}" if repeated else name


def section(contract: Contract) -> tuple[list[str], int, int]:
    """The proto's services and messages as Markdown; (lines, methods, messages)."""
    fd = descriptor(contract.proto)
    comments = _comments(fd)
    package = fd.package
    maps = {f"{package}.{m.name}.{n.name}": n for m in fd.message_type for n in m.nested_type if n.options.map_entry}
    lines = [f"### `{contract.proto}`", "", f"{contract.role} Package `{package}`.", ""]
    header_comment = comments.get((_SYNTAX,), "")
    if header_comment:
        lines += [header_comment, ""]
    methods = 0
    for s_index, service in enumerate(fd.service):
        rows: list[list[str]] = []
        for m_index, method in enumerate(service.method):
            methods += 1
            row = [code(method.name), code(_short(method.input_type, package)),
                   code(_short(method.output_type, package))]
            if contract.implemented is not None:  # a server of ours: which methods it answers
                row.append("answered" if contract.implemented(method.name) else "`UNIMPLEMENTED`")
            rows.append([*row, comments.get((_SERVICE, s_index, _METHOD, m_index), "")])
        head = ("method", "request", "response", *(("kubejoule",) if contract.implemented else ()), "notes")
        lines += [f"Service `{service.name}`:", "", *table(head, rows)]
    for index, message in enumerate(fd.message_type):
        lines += [f"**`{message.name}`**" + (f": {comments[(_MESSAGE, index)]}"
                                                        if (_MESSAGE, index) in comments else ""), ""]
        if not message.field:
            lines += ["No fields.", ""]
            continue
        lines += table(("field", "number", "type", "notes"), (
            (code(field.name), field.number, code(_field_type(field, maps, package)),
             comments.get((_MESSAGE, index, _FIELD, f_index), ""))
            for f_index, field in enumerate(message.field)))
    return lines, methods, len(fd.message_type)
