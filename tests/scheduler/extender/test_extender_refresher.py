"""The extender's refresh in a process of its own (scheduler/extender/refresher.py): a
generation published through shared memory reads back column for column; the request process
answers exactly what the same extender answers in one process (both node forms, specs sent,
unknown names, power caps, the decision log's features); the refresher exits when the request
process goes, even under kill -9."""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from fastapi.testclient import TestClient

from benchmarks.harness.extender_process import post, running_extender
from benchmarks.harness.sched_sources import FixedSource
from common.curves import PowerCurve
from scheduler.config.parse import config_from_dict
from scheduler.extender.app import create_app
from scheduler.extender.publish import (
    ENERGY,
    RAW,
    VALUES,
    Meta,
    read_generation,
    split,
    telemetry_of,
)
from scheduler.extender.refresher import Publisher
from scheduler.extender.state import NodeStates
from scheduler.extender.wiring import build_extender
from scheduler.learning.features import feature_values
from scheduler.plugins.energy import EnergyPlugin
from scheduler.telemetry.store import TelemetryStore
from tests.helpers.sched_extender import NOW, POD, node_object, telemetry
from tests.helpers.sched_http import agent_exposition, text_server
from tests.helpers.standalone_harness import wait_for

ROOT = Path(__file__).resolve().parents[3]
LINE = PowerCurve.linear(100, 260).as_points()
FAN = PowerCurve.fan(60, 240, 1.4).as_points()


def test_a_generation_reads_back_column_for_column() -> None:
    store = TelemetryStore([FixedSource(telemetry())], node_cores=lambda: {"frugal": 8.0}, clock=lambda: NOW)
    energy = EnergyPlugin(delta_p_ref_watts=50.0)
    states = NodeStates(energy, store, None)
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with mine, theirs:
        publisher = Publisher(mine, states, lambda: Meta(refreshes=store.refreshes))
        states.on_prepared.append(publisher.publish)
        store.refresh_once()
        header, fds, _, _ = socket.recv_fds(theirs, 1 << 20, 1)
        generation = read_generation(header, fds[0])
        prepared = states.current()
        states.prepare()  # the same view and states: the same snapshot, nothing published
        theirs.setblocking(False)
        with pytest.raises(BlockingIOError):
            theirs.recv(1 << 20)
    batch = prepared.batch
    assert generation.header.generation == 1 and generation.names == batch.names
    for name, values in energy.columns(batch).items():
        np.testing.assert_array_equal(generation.columns[ENERGY + name], values, err_msg=name)
    for name, values in feature_values(batch, energy).items():
        np.testing.assert_array_equal(generation.columns[VALUES + name], values, err_msg=name)
    raw = split(generation.columns, RAW)
    for row, state in enumerate(batch.states):
        assert telemetry_of(raw, generation.header.sources, row, state.info.name) == state.telemetry
    assert not generation.columns[ENERGY + "cores"].flags.writeable  # a read-only view of the memfd


# -- the same answers in one process and in two -------------------------------------------------


def _pages(now: float) -> dict[str, str]:
    """Agents for five nodes: measured with a curve, a fan curve, no curve, stale, no cores."""
    return {
        "/a/metrics": agent_exposition("a", now - 1, 150.0, utilization=0.3, curve=LINE),
        "/b/metrics": agent_exposition("b", now - 1, 90.0, utilization=0.6, curve=FAN),
        "/c/metrics": agent_exposition("c", now - 1, 120.0, utilization=0.5),
        "/d/metrics": agent_exposition("d", now - 300, 120.0, utilization=0.5, curve=LINE),
        "/e/metrics": agent_exposition("e", now - 1, 100.0, utilization=0.2, curve=FAN),
    }


def _config(server_url: str, **extra: Any) -> Any:
    return config_from_dict({
        "mode": "active",
        "refresh_seconds": 0.5,
        "scorer": {"delta_p_ref_watts": 60, "consolidation": True},
        "telemetry": {
            "agents": {"static": {n: f"{server_url}/{n}/metrics" for n in "abcde"}},
            "node_cores": {"a": 8, "b": 16, "c": 8, "d": 8},  # e: cores from its Node object
        },
        "curves": {"c": {"model": "linear", "idle_watts": 80, "max_watts": 200}},
        "extender": {"watch_cluster": False},
        **extra,
    })


def _pod(cpu: str) -> dict[str, Any]:
    return {**POD, "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}


def _answers(client: TestClient) -> list[Any]:
    out = []
    for cpu in ("250m", "2", "5"):
        pod = _pod(cpu)
        out.append(client.post("/prioritize", json={"Pod": pod, "NodeNames": [*"abcde", "zz"]}).json())
        items = [node_object(n, cpu="12") for n in "abez"]
        out.append(client.post("/prioritize", json={"Pod": pod, "Nodes": {"items": items}}).json())
        out.append(client.post("/prioritize", json={"Pod": pod, "NodeNames": [*"edcba"]}).json())
        out.append(client.post("/filter", json={"Pod": pod, "NodeNames": [*"abcde"]}).json())
    return out


@pytest.mark.slow
def test_the_request_process_answers_what_one_process_answers(tmp_path: Path) -> None:
    with text_server(_pages(time.time())) as server:
        config = _config(server.url(), power_caps_watts={"a": 180, "b": 150, "e": 120})
        local = build_extender(config, str(tmp_path / "local.jsonl"))
        remote = build_extender(config, str(tmp_path / "remote.jsonl"), refresh_process=True)
        with TestClient(create_app(local)) as one, TestClient(create_app(remote)) as two:
            wait_for(lambda: local.ready and remote.ready, 20, "both refreshed")
            first = _answers(one), _answers(two)
            # The Node objects sent reach the refresher, which builds its rows with them.
            def built_with_spec() -> bool:
                prepared = remote.states.current()
                return prepared.batch.states[prepared.index["e"]].info.cpu_cores == 12.0

            wait_for(built_with_spec, 10, "the spec of e in a generation")
            second = _answers(one), _answers(two)
    assert first[0] == first[1] and second[0] == second[1]
    assert {entry["Score"] for answer in first[0][::4] for entry in answer} != {5}  # scored
    local_lines = [json.loads(line) for line in (tmp_path / "local.jsonl").read_text().splitlines()]
    remote_lines = [json.loads(line) for line in (tmp_path / "remote.jsonl").read_text().splitlines()]
    assert len(local_lines) == len(remote_lines) > 0
    for mine, theirs in zip(local_lines, remote_lines, strict=True):
        for key in ("id", "time"):
            mine.pop(key), theirs.pop(key)
        for candidate in (*mine["candidates"], *theirs["candidates"]):
            candidate.pop("telemetry_age_seconds")  # the two processes read the clock apart
            candidate["features"].pop("telemetry_age_seconds")
        assert mine == theirs


# -- the refresher process's life ----------------------------------------------------------------


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.slow
@pytest.mark.parametrize("how", ["term", "kill"])
def test_the_refresher_goes_with_the_request_process(tmp_path: Path, how: str) -> None:
    with text_server(_pages(time.time())) as server:
        config = tmp_path / "extender.yaml"
        config.write_text(yaml.safe_dump({
            "mode": "active", "refresh_seconds": 1, "extender": {"watch_cluster": False},
            "telemetry": {"agents": {"static": {"a": f"{server.url()}/a/metrics"}}, "node_cores": {"a": 8}},
        }))
        with running_extender(tmp_path, mode="active") as extender:
            wait_for(lambda: _children(extender.pid), 20, "the refresher")
            (refresher,) = _children(extender.pid)
            body = json.dumps({"Pod": _pod("1"), "NodeNames": ["a"]}).encode()
            wait_for(lambda: json.loads(post(extender.port, "/prioritize", body).body)[0]["Score"] != 5,
                     20, "a scored node")
            os.kill(extender.pid, signal.SIGKILL if how == "kill" else signal.SIGTERM)
            extender.proc.wait(30)
            wait_for(lambda: not _alive(refresher), 20, "the refresher's exit")


@pytest.mark.slow
def test_a_refresher_that_dies_is_started_again(tmp_path: Path) -> None:
    with text_server(_pages(time.time())) as server:
        extender = build_extender(_config(server.url()), refresh_process=True)
        with TestClient(create_app(extender)) as client:
            states = extender.states
            first = states.pid
            assert first is not None and states.generations >= 1
            os.kill(first, signal.SIGKILL)
            wait_for(lambda: states.pid not in (None, first), 20, "another refresher")
            seen = states.generations
            wait_for(lambda: states.generations > seen, 20, "a generation from the new refresher")
            answer = client.post("/prioritize", json={"Pod": _pod("1"), "NodeNames": ["a"]})
            assert answer.status_code == 200 and answer.json()[0]["Score"] != 5
            second = states.pid
        assert second is not None
        wait_for(lambda: not _alive(second), 20, "the refresher's exit with the app")


def test_the_refresher_refuses_to_run_without_its_descriptors() -> None:
    from scheduler.extender.refresher import main

    assert main([]) == 2



def test_the_request_process_reads_a_node_sent_again_once() -> None:
    """The request process (RemoteStates: no refresher needed to read Nodes) remembers the
    Nodes of Nodes.items bodies by name and resourceVersion as the one-process extender does:
    kube-scheduler sends the same Nodes with every pod, and decoding them again cost two thirds
    of a 1,000-node request. The same NodeInfo object comes back (item_redo then compares
    nothing); a new resourceVersion is read again; without one, every time."""
    from benchmarks.harness.realistic_nodes import realistic_node
    from scheduler.extender.remote import RemoteStates

    remote = RemoteStates(EnergyPlugin(delta_p_ref_watts=50.0), None)
    node = realistic_node("a", 0, cpu="4")
    first = remote.node_info(json.dumps(node).encode())
    assert remote.node_info(json.dumps(node, indent=1).encode(), 3) is first
    node["status"]["allocatable"]["cpu"] = "16"
    assert remote.node_info(json.dumps(node).encode()) is first  # same resourceVersion: as first sent
    node["metadata"]["resourceVersion"] = "2000000"
    changed = remote.node_info(json.dumps(node).encode())
    assert changed.allocatable.cpu_millicores == 16000 != first.allocatable.cpu_millicores
    del node["metadata"]["resourceVersion"]
    node["status"]["allocatable"]["cpu"] = "6"
    assert remote.node_info(json.dumps(node).encode()).allocatable.cpu_millicores == 6000
