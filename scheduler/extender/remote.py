"""The request process's side of the extender's refresher (`refresher.py` has the design):
`RemoteStates` starts the refresher process, maps each generation it publishes and answers what
the extender asks of its node states from the newest one.
"""

from __future__ import annotations

import itertools
import logging
import os
import pickle
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from scheduler.domain.model import NodeInfo, NodeState, Resources
from scheduler.extender.bounded import BoundedSpecs
from scheduler.extender.publish import (
    ENERGY,
    MAX_MESSAGE_BYTES,
    RAW,
    VALUES,
    Generation,
    read_generation,
    split,
    telemetry_of,
)
from scheduler.extender.state import Prepared
from scheduler.extender.wire import RememberedNodes
from scheduler.framework.batch import CORE_COLUMNS, Builder, CandidateBatch, Columns, RowStates
from scheduler.learning.features import VALUES_KEY, node_values
from scheduler.plugins.energy import EnergyPlugin

if TYPE_CHECKING:
    from scheduler.config.parse import Config

log = logging.getLogger(__name__)

# The refresher's command (`python -c`: `-m` would import its module twice, once through the
# package's __init__).
_MAIN = "import sys; from scheduler.extender.refresher import main; sys.exit(main(sys.argv[1:]))"
START_TIMEOUT_SECONDS = 60.0
RESTART_DELAY_SECONDS = 1.0  # before a refresher that died is started again


class RemoteStates:
    """The request process's side: starts the refresher, maps each generation it publishes, and
    answers what the extender asks of its node states (`NodeStates`' reading methods) from the
    newest one. Also the telemetry view the metrics read (ages, errors, readiness)."""

    def __init__(self, energy: EnergyPlugin, config: Config, clock: Callable[[], float] = time.time,
                 log_level: str = "WARNING") -> None:
        self.energy = energy
        self.config = config
        self.clock = clock
        self.log_level = log_level
        self.cluster: object | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._current = Prepared.build(energy, {}, {})
        self._generation: Generation | None = None
        self._names: list[str] = []
        self._index: dict[str, int] = {}
        # name → (number, spec) forwarded; bounded (bounded.py): requests may name any nodes
        self._sent: BoundedSpecs[tuple[int, NodeInfo]] = BoundedSpecs()
        # As NodeStates.node_info: a Node sent again is neither decoded nor compared again
        # (item_redo sees the same NodeInfo object).
        self.node_info = RememberedNodes()
        self._unapplied: set[str] = set()  # names whose spec sent no generation has yet
        self._seq = itertools.count(1)
        self._listeners: list[Callable[[None], None]] = []  # told of each generation adopted
        self._first = threading.Event()
        self._stopping = threading.Event()
        self._life = threading.Lock()  # starting or ending the refresher process
        self.generations = 0

    # -- the process --

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stopping.clear()
        self._spawn()
        self._thread = threading.Thread(target=self._receive, name="extender-generations", daemon=True)
        self._thread.start()
        if not self._first.wait(START_TIMEOUT_SECONDS):
            log.warning("the refresher published nothing in %.0f s", START_TIMEOUT_SECONDS)

    def _spawn(self) -> None:
        with self._life:
            if self._stopping.is_set():
                return
            self._start_process()

    def _start_process(self) -> None:
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        config_fd = os.memfd_create("kubejoule-config")
        os.write(config_fd, pickle.dumps(self.config))
        os.lseek(config_fd, 0, os.SEEK_SET)
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-c", _MAIN, str(theirs.fileno()), str(config_fd), self.log_level],
                pass_fds=(theirs.fileno(), config_fd),
            )
        finally:
            theirs.close()
            os.close(config_fd)
        self._sock = mine
        for sent in self._sent.values():  # a new refresher learns the specs seen so far
            self._forward(sent)

    def stop(self) -> None:
        self._stopping.set()
        self._end_process()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(10.0)

    def _end_process(self) -> None:
        with self._life:
            self._end_process_locked()

    def _end_process_locked(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()  # the refresher sees the end of its socket and exits
        process, self._process = self._process, None
        if process is not None:
            try:
                process.wait(10.0)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5.0)

    @property
    def pid(self) -> int | None:
        process = self._process
        return process.pid if process is not None else None

    def _receive(self) -> None:
        """Adopt each generation; when the refresher dies, start another (the last generation
        is served meanwhile: its telemetry ages, and stale nodes price at their worst)."""
        while not self._stopping.is_set():
            sock = self._sock
            header: bytes = b""
            fds: list[int] = []
            if sock is not None:
                try:
                    header, fds, _, _ = socket.recv_fds(sock, MAX_MESSAGE_BYTES, 1)
                except OSError:
                    header = b""
            if self._stopping.is_set():
                return
            if not header or not fds:
                process = self._process
                log.error("the telemetry refresher exited (%s); starting another",
                          process.poll() if process is not None else "no process")
                self._end_process()
                if self._stopping.wait(RESTART_DELAY_SECONDS):
                    return
                self._spawn()
                continue
            try:
                self._adopt(read_generation(header, fds[0]))
            except Exception:  # keep the last generation
                log.exception("reading a generation failed")
            for listener in self._listeners:
                listener(None)

    def _adopt(self, generation: Generation) -> None:
        if generation.names is not None:
            self._names = generation.names
            self._index = {name: row for row, name in enumerate(self._names[:-1])}
        columns = generation.columns
        count = len(self._names)
        core = {name: columns[name] for name in CORE_COLUMNS}
        raw = split(columns, RAW)
        sources = generation.header.sources
        names, index, sent = self._names, self._index, self._sent

        def make(row: int) -> NodeState:
            name = names[row]
            spec = sent.get(name)
            info = spec[1] if spec is not None and spec[0] == raw["spec"][row] else NodeInfo(
                name, Resources(int(core["alloc_cpu"][row]), int(core["alloc_mem"][row]),
                                int(core["alloc_pods"][row]), int(core["alloc_eph"][row])))
            return NodeState(
                info=info,
                requested=Resources(int(core["req_cpu"][row]), int(core["req_mem"][row]),
                                    0, int(core["req_eph"][row])),
                telemetry=telemetry_of(raw, sources, row, name),
                cpu_since_sample_cores=float(raw["cpu_since"][row]),
                pod_count=int(raw["pods"][row]),
                daemon_pod_count=int(raw["daemons"][row]),
            )

        energy = self.energy
        derived: dict[Hashable, tuple[Builder, Columns, bool]] = {
            energy: (energy._columns, split(columns, ENERGY), False),  # noqa: SLF001 (its builder)
            (VALUES_KEY, energy): (node_values(energy).columns, split(columns, VALUES), False),
        }
        batch = CandidateBatch(RowStates(count, make), 0.0, core, derived)
        batch._names = names  # noqa: SLF001 (known: not made from the states)
        meta = generation.header.meta
        spec_numbers, in_cluster = raw["spec"], raw["cluster"]
        for name in list(self._unapplied):
            row = index.get(name)
            if row is not None and (in_cluster[row] or spec_numbers[row] == sent[name][0]):
                self._unapplied.discard(name)
        self._generation = generation
        self._current = Prepared({}, {}, batch, cluster_synced=meta.cluster_synced,
                                 index=index)
        self.generations += 1
        self._first.set()

    # -- what the extender reads (as NodeStates) --

    def current(self) -> Prepared:
        return self._current

    def known_nodes(self) -> int:
        return len(self._current.batch) - 1

    def has_spec(self, name: str) -> bool:
        return name in self._sent

    def for_names(self, names: Sequence[str], prepared: Prepared) -> list[NodeState]:
        """States of names the snapshot does not know (their spec if one was sent)."""
        return [self._bare(name, None) for name in names]

    def _bare(self, name: str, info: NodeInfo | None) -> NodeState:
        sent = self._sent.get(name)
        spec = info or (sent[1] if sent is not None else NodeInfo(name, Resources()))
        return NodeState(info=spec, pod_count=1)  # an unknown pod count is not "empty"

    def item_redo(self, infos: Sequence[NodeInfo], prepared: Prepared,
                  unknown: Sequence[int]) -> list[tuple[int, NodeState]]:
        """As NodeStates.item_redo; a new spec is forwarded to the refresher, and a row built
        with another spec is rebuilt here from its published telemetry with the spec sent."""
        generation = self._generation
        raw_spec = generation.columns[RAW + "spec"] if generation is not None else np.zeros(0, np.int64)
        cluster = generation.columns[RAW + "cluster"] if generation is not None else np.zeros(0, bool)
        index = prepared.index
        missing = set(unknown)
        redo = []
        for position, info in enumerate(infos):
            name = info.name
            row = index.get(name)
            if row is not None and cluster[row]:
                continue  # the cluster's spec
            sent = self._sent.get(name)
            if sent is None or (sent[1] is not info and sent[1] != info):
                sent = (next(self._seq), info)
                for forgotten in self._sent.put(name, sent):
                    self._unapplied.discard(forgotten)
                    self._send((0, forgotten))  # the refresher forgets it too
                self._unapplied.add(name)
                self._forward(sent)
            else:
                self._sent.touch(name)
            if row is not None and raw_spec[row] == sent[0]:
                continue
            if row is not None:
                redo.append((position, self._with_spec(prepared, row, info)))
            elif position in missing:
                redo.append((position, self._bare(name, info)))
        return redo

    @staticmethod
    def _with_spec(prepared: Prepared, row: int, info: NodeInfo) -> NodeState:
        """The row's published state, with another spec."""
        state = prepared.batch.states[row]
        return NodeState(info, state.requested, state.telemetry, state.cpu_since_sample_cores,
                         state.pod_count, daemon_pod_count=state.daemon_pod_count)

    def spec_redo(self, names: Sequence[str], prepared: Prepared) -> list[tuple[int, NodeState]]:
        """As NodeStates.spec_redo: names whose spec sent no generation has yet."""
        unapplied, generation = self._unapplied, self._generation
        if not unapplied or generation is None:
            return []
        index, cluster = prepared.index, generation.columns[RAW + "cluster"]
        redo = []
        for position, name in enumerate(names):
            row = index.get(name) if name in unapplied else None
            if row is not None and not cluster[row]:
                redo.append((position, self._with_spec(prepared, row, self._sent[name][1])))
        return redo

    def _forward(self, sent: tuple[int, NodeInfo]) -> None:
        self._send(sent)

    def _send(self, message: tuple[int, NodeInfo | str]) -> None:
        """(number, spec) to remember, or (0, name) to forget."""
        sock = self._sock
        if sock is None:
            return
        try:
            sock.send(pickle.dumps(message))
        except OSError:
            log.debug("the refresher is gone")

    # -- the telemetry view for the metrics --

    def add_listener(self, listener: Callable[[None], None]) -> None:
        self._listeners.append(listener)

    def has_cluster(self) -> bool:
        """Whether the refresher watches the cluster."""
        generation = self._generation
        return generation is not None and generation.header.meta.cluster

    def cluster_synced(self) -> bool:
        generation = self._generation
        return generation is not None and generation.header.meta.cluster_synced

    @property
    def ready(self) -> bool:
        generation = self._generation
        return generation is not None and generation.header.meta.refreshes > 0

    @property
    def errors(self) -> Mapping[tuple[str, str], int]:
        generation = self._generation
        if generation is None:
            return {}
        return {(source, kind): count for source, kind, count in generation.header.meta.errors}

    def ages(self, now: float | None = None) -> dict[str, float]:
        generation = self._generation
        if generation is None:
            return {}
        now = self.clock() if now is None else now
        has = generation.columns[RAW + "has"]
        times = generation.columns[RAW + "sample_time"]
        return {
            name: max(0.0, now - float(times[row]))
            for row, name in enumerate(self._names[:-1]) if has[row]
        }

