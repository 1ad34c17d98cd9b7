"""The `rebalancer:` configuration section and the command's handling of bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.cmd.cli import main
from scheduler.config.parse import ConfigError, config_from_dict
from scheduler.config.rebalancer import RebalancerConfig, rebalancer_config
from scheduler.rebalancer.pdbs import MULTIPLE, budget_from_k8s, covering


def test_defaults_and_a_full_section() -> None:
    assert rebalancer_config(None) == RebalancerConfig()
    assert config_from_dict({}).rebalancer.mode == "shadow"
    section = {
        "mode": "active", "interval_seconds": 30, "max_evictions_per_interval": 4,
        "max_nodes_per_interval": 2, "margin": 0.5, "balanced_k": 3, "node_cooldown_seconds": 0,
        "pod_startup_seconds": 20, "scale_down_utilization_threshold": None,
        "scale_down_unneeded_seconds": 300, "max_clock_jump_seconds": 2, "annotate_nodes": False,
        "lease_namespace": "ops", "lease_name": "rb",
    }
    config = config_from_dict({"rebalancer": section}).rebalancer
    assert config.active and config.interval_seconds == 30 and config.max_nodes_per_interval == 2
    assert config.scale_down_utilization_threshold is None and not config.annotate_nodes
    assert (config.lease_namespace, config.lease_name) == ("ops", "rb")


@pytest.mark.parametrize(
    "section,named",
    [
        ({"mode": "aggressive"}, "rebalancer.mode"),
        ({"interval_seconds": 0}, "rebalancer.interval_seconds"),
        ({"interval_seconds": "60"}, "rebalancer.interval_seconds"),
        ({"margin": -1}, "rebalancer.margin"),
        ({"balanced_k": 0}, "rebalancer.balanced_k"),
        ({"max_evictions_per_interval": 0}, "rebalancer.max_evictions_per_interval"),
        ({"max_nodes_per_interval": 1.5}, "rebalancer.max_nodes_per_interval"),
        ({"max_nodes_per_interval": True}, "rebalancer.max_nodes_per_interval"),
        ({"scale_down_utilization_threshold": 1.5}, "rebalancer.scale_down_utilization_threshold"),
        ({"annotate_nodes": "yes"}, "rebalancer.annotate_nodes"),
        ({"lease_name": ""}, "rebalancer.lease_name"),
        ({"evict_everything": True}, "rebalancer: unknown key"),
        ("active", "rebalancer: expected a mapping"),
    ],
)
def test_a_bad_value_is_refused_naming_its_key(section: object, named: str) -> None:
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        config_from_dict({"rebalancer": section})


def test_the_command_exits_2_on_a_bad_configuration(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "scheduler.yaml"
    config.write_text("rebalancer: {mode: aggressive}\n")
    assert main(["rebalancer", "--config", str(config)]) == 2
    assert "rebalancer.mode" in capsys.readouterr().err


def test_pod_disruption_budgets() -> None:
    def pdb(name: str, selector: object, allowed: object = 1, ns: str = "default") -> dict[str, object]:
        spec = {} if selector is None else {"selector": selector}
        return {"metadata": {"name": name, "namespace": ns}, "spec": spec,
                "status": {"disruptionsAllowed": allowed}}

    web = budget_from_k8s(pdb("web", {"matchLabels": {"app": "web"}}, 2))
    tier = budget_from_k8s(pdb("tier", {"matchExpressions": [
        {"key": "tier", "operator": "In", "values": ["front"]}]}))
    none = budget_from_k8s(pdb("none", None))
    other = budget_from_k8s(pdb("web", {"matchLabels": {"app": "web"}}, ns="other"))
    assert covering([web, none, other], "default", {"app": "web"}) is web
    assert covering([web, tier], "default", {"app": "web", "tier": "front"}) == MULTIPLE
    assert covering([web, tier, none], "default", {"app": "db"}) is None
    assert web.allowed == 2 and web.key == "default/web"
    everything = budget_from_k8s(pdb("all", {}))  # an empty selector selects every pod
    assert covering([everything], "default", {"x": "y"}) is everything
    no_status = budget_from_k8s({"metadata": {"name": "n"}, "spec": {"selector": {}}})
    assert no_status.allowed == 0  # no status yet: nothing allowed
    with pytest.raises(ValueError, match="disruptionsAllowed"):
        budget_from_k8s(pdb("bad", {}, "many"))
    # edited since its status was computed: the API server refuses evictions (429) until the
    # disruption controller catches up, whatever disruptionsAllowed says (kube-apiserver 1.36)
    edited = pdb("web", {"matchLabels": {"app": "web"}}, 1)
    edited["metadata"]["generation"] = 2  # type: ignore[index]
    edited["status"]["observedGeneration"] = 1  # type: ignore[index]
    assert budget_from_k8s(edited).allowed == 0
    edited["status"]["observedGeneration"] = 2  # type: ignore[index]
    assert budget_from_k8s(edited).allowed == 1


def test_never_evict_reasons() -> None:
    from scheduler.cluster.podfacts import OwnerRef, PodFacts, never_evict_reason, node_bound

    rs = (OwnerRef("ReplicaSet", "web-1"),)
    assert never_evict_reason((), PodFacts(owners=rs)) is None
    cases = [
        ((), PodFacts(owners=(OwnerRef("DaemonSet"),)), "daemonset"),
        ((("kubernetes.io/config.mirror", "x"),), PodFacts(owners=(OwnerRef("Node"),)), "mirror"),
        ((("kubernetes.io/config.source", "file"),), PodFacts(owners=rs), "mirror"),
        ((), PodFacts(owners=rs, terminating=True), "terminating"),
        ((), PodFacts(), "bare"),
        ((), PodFacts(owners=rs, local_storage=True), "local_storage"),
        ((("cluster-autoscaler.kubernetes.io/safe-to-evict", "false"),), PodFacts(owners=rs),
         "not_safe_to_evict"),
        ((("karpenter.sh/do-not-disrupt", "true"),), PodFacts(owners=rs), "do_not_disrupt"),
    ]
    for marks, facts, reason in cases:
        assert never_evict_reason(marks, facts) == reason
    assert node_bound((), PodFacts(owners=(OwnerRef("DaemonSet"),)))
    assert not node_bound((), PodFacts(owners=rs))
    # a PVC alone is not local storage: the pod's data outlives it
    pvc = PodFacts.from_k8s({"metadata": {"ownerReferences": [{"kind": "StatefulSet"}]},
                             "spec": {"volumes": [{"name": "d", "persistentVolumeClaim": {}}]}})
    assert pvc.pvc and not pvc.local_storage and never_evict_reason((), pvc) is None
