"""`kubejoule-rl cluster up|down`: a real control plane on loopback for people and tests.

kubejoule-rl cluster up --dir DIR [--nodes nodes.yaml] [--scheduler-config FILE] [--metrics-server]
                        [--autoscaler [--ca-bin PATH]] [--bin-dir DIR]
    starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler and KWOK (and
    metrics-server, serving metrics.k8s.io from KWOK's emulated kubelets) in the background,
    creates the node groups' nodes (each group's `count`) and prints the kubeconfig's path as its
    last line; with --autoscaler the real cluster-autoscaler scales the groups instead
    (rl/cluster/autoscaled_plane.py): each between its `min_count` and its `count`, the nodes on
    at t = 0 created (`initial_count`, else `min_count`), in real time with its shipped timers and
    the least-waste expander. Its binary (--ca-bin, default $KUBEJOULE_CA_BIN) must be built from
    cluster-autoscaler's GitHub source (tools/k8s/build-ca-from-source.sh): the Go module proxy
    refuses its module (403), so CI cannot build it;
kubejoule-rl cluster down --dir DIR
    stops them all, cluster-autoscaler included (logs stay in DIR/logs).

Exit status: 0; 1 when a component could not start (nothing is left running); 2 on bad input
(no --bin-dir; --autoscaler without a binary, without --nodes, or --ca-bin naming no executable
file)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from rl.cluster.autoscaled_plane import AutoscalerInputError, up_autoscaled
from rl.cluster.autoscaler import CA_BIN_ENV
from rl.cluster.controlplane import ClusterError, ClusterOptions, down, load, up
from rl.cluster.processes import ComponentError
from rl.simulation.traces.scenario import ScenarioError

BIN_ENV = "KUBEJOULE_K8S_BIN"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cluster = sub.add_parser("cluster", help="a real Kubernetes control plane on loopback (KWOK nodes)")
    verbs = cluster.add_subparsers(dest="cluster_command", required=True)
    start = verbs.add_parser("up", help="start it; prints the kubeconfig's path last")
    start.add_argument("--dir", required=True, type=Path, help="where its certificates, data and logs live")
    start.add_argument("--nodes", type=Path,
                       help="node groups (the simulator's nodes.yaml): each group's count nodes; with "
                            "--autoscaler the groups cluster-autoscaler scales (min_count … count)")
    start.add_argument("--scheduler-config", type=Path, help="a KubeSchedulerConfiguration for kube-scheduler")
    start.add_argument(
        "--autoscaler", action="store_true",
        help="also run the real cluster-autoscaler (kwok provider, real time, least-waste) on the --nodes "
             "groups; needs --ca-bin: CI cannot build it (the Go module proxy answers 403), build it from "
             "GitHub's source (docs/how-to/real-kubernetes.md)",
    )
    start.add_argument(
        "--ca-bin", type=Path, default=os.environ.get(CA_BIN_ENV),
        help=f"with --autoscaler: a cluster-autoscaler binary built from its GitHub source (default ${CA_BIN_ENV}; "
             "tools/k8s/build-ca-from-source.sh builds one)",
    )
    start.add_argument(
        "--metrics-server", action="store_true",
        help="also run metrics-server behind the aggregation layer (metrics.k8s.io; pods' usage from "
             "their kwok.x-k8s.io/usage-cpu and usage-memory annotations)",
    )
    start.add_argument(
        "--bin-dir", type=Path, default=os.environ.get(BIN_ENV),
        help=f"the components' binaries (default ${BIN_ENV}; `make -s k8s-bin-dir` prints it)",
    )
    start.add_argument("--timeout", type=float, default=180.0, help="seconds each component may take to be ready")
    stop = verbs.add_parser("down", help="stop it")
    stop.add_argument("--dir", required=True, type=Path, help="the folder `up --dir` was given")


def progress(message: str) -> None:
    print(f"cluster: {message}", file=sys.stderr, flush=True)


def command(args: argparse.Namespace) -> int:
    try:
        if args.cluster_command == "down":
            stopped = down(load(args.dir))
            print(f"stopped {len(stopped)} components ({', '.join(stopped) or 'none was running'})", file=sys.stderr)
            return 0
        if args.bin_dir is None:
            print(f"kubejoule-rl cluster up: give --bin-dir or set ${BIN_ENV} (`make -s k8s-bin-dir` prints it)",
                  file=sys.stderr)
            return 2
        options = ClusterOptions(args.dir, args.bin_dir, args.nodes, args.scheduler_config,
                                 ready_timeout_s=args.timeout, metrics_server=args.metrics_server)
        if args.autoscaler:
            cluster = up_autoscaled(options, args.ca_bin, progress)
        else:
            cluster = up(options, progress)
    except AutoscalerInputError as exc:
        print(f"kubejoule-rl cluster up: {exc}", file=sys.stderr)
        return 2
    except (ClusterError, ComponentError, ScenarioError) as exc:
        print(f"kubejoule-rl cluster: {exc}", file=sys.stderr)
        return 1
    print(f"cluster: up; logs in {cluster.directory / 'logs'}; stop with: kubejoule-rl cluster down --dir {args.dir}",
          file=sys.stderr)
    print(cluster.kubeconfig)
    return 0
