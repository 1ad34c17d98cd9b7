"""A prepared snapshot as flat columns in shared memory, and back.

The refresher process (`refresher.py`) builds each `Prepared` snapshot — every node's state and
the energy plugin's columns, the feature values, what a node's telemetry was — and writes its
columns into a sealed memfd (anonymous shared memory: nothing to clean up after a crash); the
request process maps it and reads the columns in place, with numpy views. Each snapshot has a
generation number; a request reads the one generation it found current, whole.

Layout of one generation: the column table and metadata (msgspec JSON, in the message that
carries the file descriptor), then in the memfd each column at an 8-byte aligned offset, and the
node names (a JSON list) — names only when they changed (`layout`), as they rarely do.
"""

from __future__ import annotations

import math
import mmap
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import msgspec
import numpy as np

from common.curves import POINT_COUNT
from scheduler.domain.model import NodeState, NodeTelemetry
from scheduler.framework.batch import CORE_COLUMNS, CandidateBatch
from scheduler.learning.features import feature_values
from scheduler.plugins.energy import EnergyPlugin

ENERGY = "energy."  # column name prefixes: the energy plugin's columns, the feature values
VALUES = "values."
RAW = "raw."  # what each row's state was made of (to rebuild a row's NodeState on demand)
SOURCES = ("none", "rapl", "estimated")  # telemetry sources by code (others: appended per generation)
_ALIGN = 8
# The largest message either side sends over the socket pair (a generation's header; a Node spec).
MAX_MESSAGE_BYTES = 1 << 20


class Column(msgspec.Struct, array_like=True):
    name: str
    dtype: str
    shape: list[int]
    offset: int


class Meta(msgspec.Struct):
    """What the refresher says with a generation of its telemetry store and cluster view."""

    refreshes: int = 0  # the store's refreshes so far (ready after the first)
    errors: list[tuple[str, str, int]] = msgspec.field(default_factory=list)  # (source, kind, count)
    cluster: bool = False  # it watches the cluster
    cluster_synced: bool = True  # its cluster view had listed everything (or there is none)


class Header(msgspec.Struct):
    """What comes with a generation's file descriptor."""

    generation: int
    layout: int  # changes when the node names change
    size: int  # bytes in the memfd
    columns: list[Column]
    names_offset: int = -1  # -1: the names of the last layout
    names_size: int = 0
    sources: list[str] = msgspec.field(default_factory=lambda: list(SOURCES))
    meta: Meta = msgspec.field(default_factory=Meta)


_HEADER = msgspec.json.Decoder(Header)


def raw_columns(states: Sequence[NodeState], sources: list[str], spec_seq: Sequence[int], from_cluster: Sequence[bool]) -> dict[str, np.ndarray]:
    """Each row's telemetry and pod counts as columns (NaN for an unknown number; `sources`
    grows with any source name not in it yet)."""
    count = len(states)
    nan = math.nan
    has = np.zeros(count, dtype=bool)
    floats = np.full((5, count), nan)  # sample time, watts, utilization, cores, cpu since
    curve = np.full((count, POINT_COUNT), nan)
    source = np.zeros(count, dtype=np.int8)
    pods = np.zeros((2, count), dtype=np.int64)  # pod count, DaemonSet and mirror pods
    for i, state in enumerate(states):
        t = state.telemetry
        floats[4, i] = state.cpu_since_sample_cores
        pods[:, i] = (state.pod_count, state.daemon_pod_count)
        if t is None:
            continue
        has[i] = True
        floats[0, i] = t.sample_time
        floats[1, i] = nan if t.watts is None else t.watts
        floats[2, i] = nan if t.utilization is None else t.utilization
        floats[3, i] = nan if t.cores is None else t.cores
        if t.source not in sources:
            sources.append(t.source)
        source[i] = sources.index(t.source)
        if t.curve_points is not None:
            curve[i] = t.curve_points
    return {
        RAW + "has": has, RAW + "sample_time": floats[0], RAW + "watts": floats[1],
        RAW + "utilization": floats[2], RAW + "cores": floats[3], RAW + "cpu_since": floats[4],
        RAW + "curve": curve, RAW + "source": source, RAW + "pods": pods[0], RAW + "daemons": pods[1],
        RAW + "spec": np.asarray(spec_seq, dtype=np.int64),
        RAW + "cluster": np.asarray(from_cluster, dtype=bool),
    }


def telemetry_of(raw: Mapping[str, np.ndarray], sources: Sequence[str], row: int, name: str) -> NodeTelemetry | None:
    """The NodeTelemetry a row was made with (raw_columns() read back, without their prefix)."""
    if not raw["has"][row]:
        return None

    def number(key: str) -> float | None:
        value = float(raw[key][row])
        return None if value != value else value

    curve = raw["curve"][row]
    return NodeTelemetry(
        node=name,
        sample_time=float(raw["sample_time"][row]),
        watts=number("watts"),
        source=sources[int(raw["source"][row])],
        utilization=number("utilization"),
        cores=number("cores"),
        curve_points=None if np.isnan(curve).any() else tuple(curve.tolist()),
    )


def all_columns(batch: CandidateBatch, energy: EnergyPlugin, raw: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every column a generation carries: the batch's core columns, the energy plugin's and the
    feature values (computed here if not yet), and the raw ones."""
    columns: dict[str, np.ndarray] = {name: getattr(batch, name) for name in CORE_COLUMNS}
    columns.update({ENERGY + k: v for k, v in energy.columns(batch).items()})
    columns.update({VALUES + k: v for k, v in feature_values(batch, energy).items()})
    columns.update(raw)
    return columns


def write_generation(
    generation: int,
    layout: int,
    columns: Mapping[str, np.ndarray],
    names: Sequence[str] | None,
    sources: list[str],
    meta: Meta,
) -> tuple[bytes, int]:
    """(header, memfd) of one generation: the columns (and `names` when the layout changed)
    written into a new memfd, sealed against writes. The caller sends and closes the fd."""
    table: list[Column] = []
    offset = 0
    arrays = []
    for name, values in columns.items():
        values = np.ascontiguousarray(values)
        table.append(Column(name, values.dtype.str, list(values.shape), offset))
        arrays.append((offset, values))
        offset += -(-values.nbytes // _ALIGN) * _ALIGN
    names_blob = msgspec.json.encode(list(names)) if names is not None else b""
    names_offset = offset if names is not None else -1
    size = max(offset + len(names_blob), 1)
    fd = os.memfd_create("kubejoule-generation", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        os.ftruncate(fd, size)
        with mmap.mmap(fd, size) as memory:
            for start, values in arrays:
                memory[start : start + values.nbytes] = values.tobytes()
            if names is not None:
                memory[names_offset : names_offset + len(names_blob)] = names_blob
        import fcntl

        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE)
    except BaseException:
        os.close(fd)
        raise
    header = Header(generation, layout, size, table, names_offset, len(names_blob), sources, meta)
    return msgspec.json.encode(header), fd


@dataclass(frozen=True)
class Generation:
    """One generation, mapped: its columns are numpy views of the shared memory."""

    header: Header
    columns: dict[str, np.ndarray]
    names: list[str] | None  # None: the names of the last layout


def read_generation(header_bytes: bytes, fd: int) -> Generation:
    """Map a generation's memfd (and close the descriptor: the mapping keeps the memory)."""
    header = _HEADER.decode(header_bytes)
    try:
        memory = mmap.mmap(fd, header.size, prot=mmap.PROT_READ)
    finally:
        os.close(fd)
    columns = {}
    for column in header.columns:
        dtype = np.dtype(column.dtype)
        count = int(np.prod(column.shape)) if column.shape else 1
        values = np.frombuffer(memory, dtype=dtype, count=count, offset=column.offset)
        columns[column.name] = values.reshape(column.shape)
    names = None
    if header.names_offset >= 0:
        start = header.names_offset
        names = msgspec.json.decode(memory[start : start + header.names_size], type=list[str])
    return Generation(header, columns, names)


def split(columns: Mapping[str, np.ndarray], prefix: str) -> dict[str, np.ndarray]:
    """The columns under `prefix`, without it."""
    return {k[len(prefix):]: v for k, v in columns.items() if k.startswith(prefix)}
