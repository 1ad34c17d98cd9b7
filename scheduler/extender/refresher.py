"""The extender's telemetry refresh in a process of its own, so that it never holds the request
path's interpreter.

`kubejoule-scheduler extender` starts `python -m scheduler.extender.refresher` beside the HTTP
server. The refresher runs everything pod-independent: the telemetry sources and their decoding,
the merge, the energy plugin's online fits and per-node columns (curve tables, prices), the
feature values, the cluster watch; each snapshot it prepares is published as a generation of
columns in shared memory (`publish.py`). The request process (`RemoteStates`, `remote.py`) only
maps the newest generation and reads it: a request scores against one generation, whole, and the
first request after a refresh costs what any other does.

The two talk over a SOCK_SEQPACKET socket pair: refresher → request process, each generation's
header with its memfd; request process → refresher, the Node objects Nodes.items bodies carried
(numbered: a generation says which spec each row was built with). When the request process goes
away (even `kill -9`), the socket closes and the refresher exits. This module is the refresher's
side (what the process runs); it is started by `remote.py`, never imported by the request path.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import socket
import sys
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import msgspec

from scheduler.extender.publish import (
    MAX_MESSAGE_BYTES,
    SOURCES,
    Meta,
    all_columns,
    raw_columns,
    write_generation,
)
from scheduler.extender.state import NodeStates, Prepared

if TYPE_CHECKING:
    from scheduler.config.parse import Config

log = logging.getLogger(__name__)


class Publisher:
    """Writes each snapshot NodeStates prepares as a generation and sends it (refresher side)."""

    def __init__(self, sock: socket.socket, states: NodeStates, meta: Callable[[], Meta]) -> None:
        self.sock = sock
        self.states = states
        self.meta = meta
        self.generation = 0
        self.layout = 0
        self._names: list[str] | None = None
        self._sources: list[str] = list(SOURCES)
        self._lock = threading.Lock()

    def publish(self, prepared: Prepared) -> None:
        batch = prepared.batch
        states = batch.states
        names = batch.names
        spec_seq = self.states.spec_seq
        known = self.states.node_infos
        seqs = [
            spec_seq.get(n, 0) if n not in prepared.from_cluster and s.info is known.get(n) else 0
            for n, s in zip(names, states, strict=True)
        ]
        cluster = [n in prepared.from_cluster for n in names]
        with self._lock:
            self.generation += 1
            changed = names != self._names
            if changed:
                self.layout += 1
                self._names = list(names)
            raw = raw_columns(states, self._sources, seqs, cluster)
            meta = msgspec.structs.replace(self.meta(), cluster_synced=prepared.cluster_synced)
            header, fd = write_generation(
                self.generation, self.layout, all_columns(batch, self.states.energy, raw),
                names if changed else None, self._sources, meta,
            )
            try:
                socket.send_fds(self.sock, [header], [fd])
            except OSError:
                log.debug("the request process is gone")
            finally:
                os.close(fd)


def _serve(sock: socket.socket, config: Config) -> None:
    """The refresher's main loop: start the parts, publish, take specs, until the socket ends."""
    from scheduler.extender.wiring import build_refresh_parts

    energy, store, states, on_start, on_stop = build_refresh_parts(config)

    def meta() -> Meta:
        return Meta(
            refreshes=store.refreshes,
            errors=[(source, kind, count) for (source, kind), count in sorted(store.errors.items())],
            cluster=states.cluster is not None,
        )

    publisher = Publisher(sock, states, meta)
    states.on_prepared.append(publisher.publish)
    store.start()
    states.start()
    for start in on_start:
        start()
    try:
        while True:
            message = sock.recv(MAX_MESSAGE_BYTES)
            if not message:
                return
            seq, info = pickle.loads(message)  # noqa: S301 (our own parent, over a socket pair)
            if isinstance(info, str):  # (0, name): the parent forgot that Node (bounded.py)
                states.forget_spec(info)
            else:
                states.remember_spec(info, seq)
    finally:
        states.stop()
        store.stop()
        for stop in on_stop:
            stop()


def main(argv: Sequence[str]) -> int:
    """The refresher: `main([SOCKET_FD, CONFIG_FD, LOG_LEVEL])` (started by RemoteStates: the
    configuration comes pickled in a memfd)."""
    args = list(argv)
    if len(args) < 2:
        print("usage: refresher SOCKET_FD CONFIG_FD [LOG_LEVEL] (started by the extender)", file=sys.stderr)
        return 2
    sock = socket.socket(fileno=int(args[0]))
    with os.fdopen(int(args[1]), "rb") as file:
        config = pickle.load(file)  # noqa: S301 (written by the parent)
    logging.basicConfig(level=args[2] if len(args) > 2 else "WARNING",
                        format="%(asctime)s refresher %(levelname)s %(name)s: %(message)s")
    import gc

    gc.freeze()
    with contextlib.suppress(KeyboardInterrupt):
        _serve(sock, config)
    return 0
