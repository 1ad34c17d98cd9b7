"""CandidateBatch: the candidate nodes for one pod, as NodeStates plus numpy columns.

Columns (int64, one row per node): allocatable and requested cpu (millicores), memory and
ephemeral storage (bytes) and pods; kube-scheduler's non-zero requested cpu and memory
(`nz_cpu`, `nz_mem`); the node's pod count.

Plugins keep per-node, pod-independent work in *derived columns*: `batch.derived(key, build)`
calls `build(states)` once and keeps its arrays with the batch. A batch is reused across pods
while nodes do not change: `update(rows, states)` patches the core columns and every derived
column of those rows only (one node changes per pod placed), `take(rows)` gives the sub-batch
of some rows (the feasible ones), and `at(now)` the same batch at another time — all three
share or slice arrays rather than recomputing them.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from operator import itemgetter

import numpy as np

from scheduler.domain.model import NodeState

Columns = dict[str, np.ndarray]
Builder = Callable[[Sequence[NodeState]], Columns]

# Per-pod-shape entries (node_mask()) kept per owner before they are dropped and rebuilt.
MAX_SHAPES_PER_OWNER = 256

CORE_COLUMNS = (
    "alloc_cpu",
    "alloc_mem",
    "alloc_eph",
    "alloc_pods",
    "req_cpu",
    "req_mem",
    "req_eph",
    "nz_cpu",
    "nz_mem",
    "pod_count",
)


def core_columns(states: Sequence[NodeState]) -> Columns:
    """The core int64 columns of `states`."""
    count = len(states)
    data = np.zeros((len(CORE_COLUMNS), count), dtype=np.int64)
    for i, state in enumerate(states):
        alloc = state.info.allocatable
        req = state.requested
        nz = state.nonzero_requested or req
        data[:, i] = (
            alloc.cpu_millicores,
            alloc.memory_bytes,
            alloc.ephemeral_storage_bytes,
            alloc.pods,
            req.cpu_millicores,
            req.memory_bytes,
            req.ephemeral_storage_bytes,
            nz.cpu_millicores,
            nz.memory_bytes,
            max(state.pod_count, req.pods),
        )
    return {name: data[k] for k, name in enumerate(CORE_COLUMNS)}


class CandidateBatch:
    """Candidate nodes for one pod (see the module docstring). Not thread-safe: one per
    scheduling thread."""

    alloc_cpu: np.ndarray
    alloc_mem: np.ndarray
    alloc_eph: np.ndarray
    alloc_pods: np.ndarray
    req_cpu: np.ndarray
    req_mem: np.ndarray
    req_eph: np.ndarray
    nz_cpu: np.ndarray
    nz_mem: np.ndarray
    pod_count: np.ndarray

    def __init__(
        self,
        states: Sequence[NodeState],
        now: float = 0.0,
        columns: Columns | None = None,
        derived: dict[Hashable, tuple[Builder, Columns, bool]] | None = None,
        parent: tuple[CandidateBatch, np.ndarray] | None = None,
    ) -> None:
        # A RowStates (states made on demand, e.g. from columns published by another process)
        # is kept as it is; anything else becomes a list.
        self.states: list[NodeState] = states if isinstance(states, RowStates) else list(states)  # type: ignore[assignment]
        self.now = float(now)
        self._columns = core_columns(self.states) if columns is None else columns
        for name in CORE_COLUMNS:
            setattr(self, name, self._columns[name])
        # key → (build, columns, depends only on NodeInfo)
        self._derived: dict[Hashable, tuple[Builder, Columns, bool]] = derived or {}
        self._names: list[str] | None = None
        self._parent = parent  # (batch, rows): derived columns are sliced from it on demand

    @classmethod
    def of(cls, states: Sequence[NodeState], now: float = 0.0) -> CandidateBatch:
        return cls(states, now)

    def __len__(self) -> int:
        return len(self.states)

    @property
    def names(self) -> list[str]:
        if self._names is None:
            self._names = [state.info.name for state in self.states]
        return self._names

    # -- derived columns -------------------------------------------------------------------------

    def derived(self, key: Hashable, build: Builder, info_only: bool = False) -> Columns:
        """The columns `build(states)` gives, computed once per batch (and per `key`) and kept
        through `at()` and `update()`; a `take()` sub-batch slices them from its parent when
        first asked. `key` names the owner (a plugin instance, or a tuple starting with it).
        `info_only`: the columns depend only on each node's NodeInfo (its spec), so `update()`
        recomputes them only where the NodeInfo object changed."""
        entry = self._derived.get(key)
        if entry is None:
            if self._parent is not None:
                parent, index = self._parent
                whole = parent.derived(key, build, info_only)
                cols = {name: values[index] for name, values in whole.items()}
            else:
                cols = build(self.states)
            entry = self._derived[key] = (build, cols, info_only)
        return entry[1]

    def info_only_entries(
        self, states: Sequence[NodeState]
    ) -> dict[Hashable, tuple[Builder, Columns, bool]]:
        """The derived entries that depend only on the nodes' specs, for a new batch of the same
        nodes as `states` (row for row): copies, with the rows whose NodeInfo is not this
        batch's built again — a node updated in place since (its spec changed under the batch:
        carried over as it was, a cordoned node would still pass the spec filters)."""
        if len(states) != len(self.states):
            raise ValueError(f"{len(states)} states for a batch of {len(self.states)} nodes")
        mine = self.states
        changed = [row for row, state in enumerate(states) if mine[row].info is not state.info]
        entries = {}
        # list(): one C call, so another thread adding an entry meanwhile cannot break it
        for key, (build, cols, info_only) in list(self._derived.items()):
            if not info_only:
                continue
            copied = {name: values.copy() for name, values in cols.items()}
            if changed:
                for name, values in build([states[row] for row in changed]).items():
                    copied[name][changed] = values
            entries[key] = (build, copied, True)
        return entries

    def forget(self, key: Hashable) -> None:
        """Drop a derived entry (its owner's inputs changed in a way the states do not show)."""
        self._derived.pop(key, None)

    # -- reuse --------------------------------------------------------------------------------------

    def at(self, now: float) -> CandidateBatch:
        """The same nodes at another time; every array is shared (and the names list)."""
        self.names  # noqa: B018 (computed once here rather than once per copy)
        other = CandidateBatch.__new__(CandidateBatch)
        other.__dict__.update(self.__dict__)
        other.now = float(now)
        return other

    def take(self, rows: np.ndarray | Sequence[int], copy: bool = False) -> CandidateBatch:
        """The sub-batch of `rows` (in that order), with its core and derived columns sliced
        (the batch itself when `rows` are all of it in order, unless `copy`: to be updated)."""
        index = np.asarray(rows, dtype=np.intp)
        if not copy and len(index) == len(self.states) and bool((index == np.arange(len(index))).all()):
            return self
        columns = {name: values[index] for name, values in self._columns.items()}
        rows_list = index.tolist()
        states = self.states
        picked = states.pick(rows_list) if isinstance(states, RowStates) else _pick(states, rows_list)
        sub = CandidateBatch(picked, self.now, columns, parent=(self, index))
        if self._names is not None:
            sub._names = _pick(self._names, rows_list)
        return sub

    def update(self, rows: Sequence[int], states: Sequence[NodeState]) -> None:
        """Replace the nodes of `rows` by `states` (same nodes, new state), patching the core
        columns and each derived column for those rows only. Sub-batches taken before do not
        see the change."""
        if not len(rows):
            return
        index = np.asarray(rows, dtype=np.intp)
        fresh = core_columns(states)
        for name, values in fresh.items():
            self._columns[name][index] = values
        spec_changed = [
            i for i, (row, state) in enumerate(zip(index.tolist(), states, strict=True))
            if self.states[row].info is not state.info
        ]
        for build, cols, info_only in self._derived.values():
            if info_only:
                if not spec_changed:
                    continue
                new = build([states[i] for i in spec_changed])
                for name, values in new.items():
                    cols[name][index[spec_changed]] = values
                continue
            new = build(states)
            for name, values in new.items():
                cols[name][index] = values
        for row, state in zip(index.tolist(), states, strict=True):
            self.states[row] = state
        # the same nodes: `names` stays valid


    def copy_rows(self, rows: Sequence[int], parent: CandidateBatch, parent_rows: Sequence[int]) -> None:
        """Bring `rows` of this sub-batch up to date from `parent_rows` of the batch it was
        taken from (already updated): its core and derived values are copied, not rebuilt."""
        if not len(rows):
            return
        index = np.asarray(rows, dtype=np.intp)
        source = np.asarray(parent_rows, dtype=np.intp)
        for name, values in self._columns.items():
            values[index] = parent._columns[name][source]
        for key, (_, cols, _) in self._derived.items():
            theirs = parent._derived[key][1]
            for name, values in cols.items():
                values[index] = theirs[name][source]
        for row, from_row in zip(index.tolist(), source.tolist(), strict=True):
            self.states[row] = parent.states[from_row]


class RowStates(Sequence[NodeState]):
    """States made on demand, row by row (a published snapshot's nodes: building all of them
    would cost what publishing saved). `pick(rows)` is the states of some rows, also on demand;
    a row can be replaced (`CandidateBatch.update`)."""

    def __init__(self, count: int, make: Callable[[int], NodeState]) -> None:
        self._count = count
        self._make = make
        self._made: dict[int, NodeState] = {}

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, row: int) -> NodeState:  # type: ignore[override]
        if not -self._count <= row < self._count:
            raise IndexError(row)
        row %= self._count
        state = self._made.get(row)
        if state is None:
            state = self._made[row] = self._make(row)
        return state

    def __setitem__(self, row: int, state: NodeState) -> None:
        self._made[row % self._count] = state

    def pick(self, rows: list[int]) -> RowStates:
        return RowStates(len(rows), lambda k: self[rows[k]])


def _pick(items: list, rows: list[int]) -> list:
    """[items[i] for i in rows], at C speed."""
    if not rows:
        return []
    if len(rows) == 1:
        return [items[rows[0]]]
    return list(itemgetter(*rows)(items))


def node_mask(
    batch: CandidateBatch, owner: object, shape: Hashable, check: Callable[[NodeState], bool]
) -> np.ndarray:
    """`check(state)` for every row, as a bool array, for a check that depends only on the
    node's spec and on the pod's `shape` (its tolerations, selectors…): computed once per shape
    and kept with the batch (at most MAX_SHAPES_PER_OWNER shapes per owner)."""
    return node_values(batch, owner, shape, check, bool)


def node_values(
    batch: CandidateBatch,
    owner: object,
    shape: Hashable,
    value: Callable[[NodeState], object],
    dtype: type = np.int64,
) -> np.ndarray:
    """node_mask() for any per-node value (e.g. a count), as an array of `dtype`."""
    key = (owner, shape)
    if key not in batch._derived:
        owned = [k for k in batch._derived if isinstance(k, tuple) and k[0] is owner]
        if len(owned) >= MAX_SHAPES_PER_OWNER:
            for k in owned:
                batch.forget(k)

    def build(states: Sequence[NodeState]) -> Columns:
        return {"v": np.fromiter((value(s) for s in states), dtype=dtype, count=len(states))}

    return batch.derived(key, build, info_only=True)["v"]
