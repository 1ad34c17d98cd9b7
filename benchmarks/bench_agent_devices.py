"""The agent benchmark's GPU node with a BMC (benchmarks/bench_agent.py `--devices`), as a GPU node
runs the agent: 8 GPUs read through the real nvidia-ml-py from the stand-in libnvidia-ml.so.1
(benchmarks/harness/nvml_standin.c: the agent's own cost per NVML call, not a driver's), the kubelet's
PodResources on a real gRPC Unix socket, and an HTTPS Redfish BMC (a DMTF EnvironmentMetrics
chassis) polled every 10 s with its certificate verified. Half of the GPUs are allocated to one
pod each; the other half are shared by two pods' processes each. The servers run in the
benchmark's process, not the agent's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

GPUS = 8
PLATFORM_WATTS = 2400.0
GPU_WATTS = 250.0


@contextlib.contextmanager
def gpu_node(workdir: Path, pods: list[tuple[str, str, list[int]]]) -> Iterator[tuple[list[str], dict[str, str]]]:
    """(the agent's extra arguments, its extra environment) for a node with GPUs and a BMC.
    `pods`: (namespace, name, pids of its app) of the pods that use the GPUs."""
    from benchmarks.harness import nvml_standin, redfish_mockup
    from benchmarks.harness.expander_grpc import self_signed
    from benchmarks.harness.podresources_server import GPU, serving

    state = nvml_standin.NvmlState.with_gpus(workdir / "nvml.state", GPUS)
    allocated = []
    for index, gpu in enumerate(state.gpus):
        gpu.energy_rate_mw = gpu.power_mw = round(GPU_WATTS * 1000)
        if index < GPUS // 2:  # exclusive: the whole GPU is its pod's
            namespace, name, pids = pods[index]
            allocated.append((namespace, name, "main", GPU, [gpu.uuid]))
            gpu.processes = [(pids[0], 80, 0)]
        else:  # shared by two pods' processes (time-slicing: no allocation)
            gpu.processes = [(pods[index][2][0], 45, 0), (pods[index + GPUS][2][0], 30, 0)]
    state.write()
    credentials = workdir / "bmc"
    credentials.mkdir()
    (credentials / "username").write_text(redfish_mockup.USERNAME)
    (credentials / "password").write_text(redfish_mockup.PASSWORD)
    tls = self_signed(workdir, ("127.0.0.1",))
    socket = workdir / "kubelet.sock"
    with serving(socket, allocated), redfish_mockup.serve(redfish_mockup.environment(PLATFORM_WATTS), tls=tls) as bmc:
        yield [
            "--nvml-library", str(nvml_standin.build()), "--pod-resources-socket", str(socket),
            "--bmc-url", bmc.url, "--bmc-credentials", str(credentials), "--bmc-ca-bundle", str(tls.cert_path),
        ], {nvml_standin.STATE_ENV: str(state.path)}
