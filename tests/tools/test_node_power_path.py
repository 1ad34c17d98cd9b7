"""tools/measure/node_power_path.py: node power followed from the RAPL reader to the exporter's
families (issue 34). The count is pinned: a change that sends node power back into a module it
has left fails here; a change that saves a return lowers the pin."""

from __future__ import annotations

from pathlib import Path

from tools.measure.node_power_path import follow

# The route's returns to a module already visited, as the code stands (38 before issue 34's
# moves: zone kinds and node zones beside their one use, pods and views with attribution, the
# invariant with the composition, the counters' rules in the ledger, every family in the sections;
# 11 before the publish and the scrape became one pass each: each zone's kind carried from the
# compute stage, the interval's series resolved once by the energy ledger and handed to the
# carbon ledger, the exporter reading the series published). The one left: the counters' rules,
# shared by the joules and the grams.
RETURNS_PINNED = 1


def test_node_power_returns_to_at_most_the_pinned_number_of_modules() -> None:
    route = follow()
    assert route.returns <= RETURNS_PINNED, (
        f"node power returns to {route.returns} modules already visited (pinned: {RETURNS_PINNED}): "
        f"{route.revisited()}; run `python tools/measure/node_power_path.py --route`")


def test_the_route_runs_from_the_rapl_reader_through_the_monitor_to_the_exporter() -> None:
    modules = [module for module, _ in follow().stays]
    assert modules[0] == "agent.device.rapl"
    assert modules.index("agent.exporter.prometheus") > modules.index("agent.monitor.accounts")  # the scrape
    for stop in ("agent.monitor.sampler", "agent.monitor.rapl_power", "agent.monitor.attribution",
                 "agent.monitor.composition", "agent.monitor.accounts", "agent.monitor.energy_ledger",
                 "agent.monitor.carbon_ledger", "agent.exporter.prometheus_sections",
                 "agent.exporter.prometheus_carbon"):
        assert stop in modules, stop
    # the compute stage passes through each of its modules once
    compute = modules[: modules.index("agent.cmd.server")]
    assert len(compute) == len(set(compute)), compute
    # so does the publish, but for the counters' rules that the joules and the grams share
    publish = [m for m in modules[modules.index("agent.cmd.server"): modules.index("agent.exporter.prometheus")]
               if m != "agent.monitor.counters"]
    assert len(publish) == len(set(publish)), publish
    # the scrape reads what the monitor published: node power enters no module outside the exporter
    scrape = modules[modules.index("agent.exporter.prometheus"):]
    assert all(m.startswith("agent.exporter.") for m in scrape), scrape


def _write(root: Path, name: str, text: str) -> None:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_a_planted_bounce_between_modules_is_counted(tmp_path: Path) -> None:
    """A reading handed from `b` to `a` and back to `b` is one return; a function that is handed
    the reading but never reads it is no stop; a dataclass carries it in its field only."""
    _write(tmp_path, "agent/__init__.py", "")
    _write(tmp_path, "agent/device/__init__.py", "")
    _write(tmp_path, "agent/device/rapl.py", "def read_rapl(fs):\n    return fs.read()\n")
    _write(tmp_path, "agent/a.py", (
        "from dataclasses import dataclass\n"
        "from agent import b\n\n"
        "@dataclass\n"
        "class Box:\n"
        "    watts: float\n"
        "    name: str\n\n"
        "def double(w):\n"
        "    return w * 2\n\n"
        "def scale(w):\n"
        "    return double(b.unit(w))\n\n"
        "def ignore(box):\n"
        "    return box.name\n\n"
        "def boxed(w):\n"
        "    return Box(w, 'n')\n"
    ))
    _write(tmp_path, "agent/b.py", (
        "from agent import a\n\n"
        "def unit(w):\n"
        "    return w + 0\n\n"
        "def finish(w):\n"
        "    return w\n"
    ))
    _write(tmp_path, "agent/loop.py", (
        "from agent.device.rapl import read_rapl\n"
        "from agent import a, b\n\n"
        "def run(fs):\n"
        "    reading = read_rapl(fs)\n"
        "    box = a.boxed(reading)\n"
        "    a.ignore(box)\n"
        "    w = a.scale(box.watts)\n"
        "    return b.finish(w)\n"
    ))
    _write(tmp_path, "common/__init__.py", "")
    route = follow(tmp_path, roots=[("agent.loop", "run")])
    assert [m for m, _ in route.stays] == ["agent.device.rapl", "agent.a", "agent.b", "agent.a", "agent.b"]
    assert route.stays[1] == ("agent.a", ("boxed", "scale"))  # `ignore` read only the name: no stop
    assert route.returns == 2 and route.modules == 3
