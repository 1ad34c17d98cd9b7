"""Which Kubernetes calls each component's code can make, derived from the code, and the RBAC
rules its ServiceAccount is granted by the manifests — for tests/deploy/test_deploy_rbac_derived.py
and the generated RBAC table of docs/deploy.md (`python -m tests.helpers.rbac_calls`).

A component's calls: every module its entry package (and the scheduler/cmd/ module that wires it,
where one does) imports, directly or not (grimp's import graph, function-level imports included),
scanned for attributes named after a call of its Kubernetes adapter (scheduler/cluster/kube.py's
functions, agent/kube/client.py's KubeClient methods). Each call's rule is in the adapter's
PERMISSIONS table, next to the call itself."""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Iterable
from functools import cache
from pathlib import Path

import grimp

from tests.helpers.deploy_kustomize import Obj, build, user_kustomization

ROOT = Path(__file__).resolve().parents[2]
Rule = tuple[str, str, str, str]  # (API group, resource, verb, scope: "cluster" or "namespace")

# ServiceAccount → (its adapter module, the entry package of the code it runs).
ACCOUNTS: dict[str, tuple[str, str]] = {
    "kubejoule-agent": ("agent.kube.client", "agent"),
    "kubejoule-scheduler": ("scheduler.cluster.kube", "scheduler.standalone"),
    "kubejoule-extender": ("scheduler.cluster.kube", "scheduler.extender"),
    "kubejoule-rebalancer": ("scheduler.cluster.kube", "scheduler.rebalancer"),
    "kubejoule-cloud-provider": ("scheduler.cluster.kube", "scheduler.autoscaler.provider"),
}
# The command module that wires an account's entry package, its code too (the rebalancer's Lease).
WIRING: dict[str, str] = {
    "kubejoule-rebalancer": "scheduler.cmd.rebalancer_cli",
    "kubejoule-cloud-provider": "scheduler.cmd.provider_cli",
}
# Modules of an account's code that never run under its ServiceAccount: the cloud provider's
# simulated backend creates KWOK Nodes on the loopback control plane, with that plane's own
# credentials (docs/bare-metal.md); the shipped role never grants nodes create.
NOT_UNDER_ACCOUNT: dict[str, frozenset[str]] = {
    "kubejoule-cloud-provider": frozenset({"scheduler.autoscaler.provider.simulated"}),
}
# Every component, so that every account is in the build.
ALL_COMPONENTS = (
    "extender", "rebalancer", "autoscaler-expander", "servicemonitor", "bmc", "gpu", "calibration", "cloud-provider",
)


@cache
def _graph() -> grimp.ImportGraph:
    return grimp.build_graph("agent", "scheduler", cache_dir=None)


def _source(module: str) -> Path:
    path = ROOT / module.replace(".", "/")
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def permissions(adapter: str) -> dict[str, tuple[Rule, ...]]:
    table: dict[str, tuple[Rule, ...]] = importlib.import_module(adapter).PERMISSIONS
    return table


def calls_of(account: str) -> set[str]:
    """The adapter calls the account's code can make."""
    adapter, entry = ACCOUNTS[account]
    graph = _graph()
    modules = set(graph.find_descendants(entry)) | {entry} | ({WIRING[account]} if account in WIRING else set())
    for module in list(modules):
        modules |= graph.find_upstream_modules(module)
    modules -= NOT_UNDER_ACCOUNT.get(account, frozenset())
    names = set(permissions(adapter))
    found = set()
    for module in sorted(modules):  # the adapter too: its own helpers may call its calls
        if not module.startswith(("agent", "scheduler")):
            continue
        tree = ast.parse(_source(module).read_text())
        found |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr in names}
    return found


def needed(account: str) -> set[Rule]:
    adapter, _ = ACCOUNTS[account]
    table = permissions(adapter)
    return {rule for call in calls_of(account) for rule in table[call]}


def built(work: Path) -> list[Obj]:
    return build(user_kustomization(work, "overlays/intel", ALL_COMPONENTS))


def _find(objects: Iterable[Obj], kind: str, name: str, namespace: str | None) -> Obj:
    (obj,) = [
        o for o in objects
        if o["kind"] == kind and o["metadata"]["name"] == name
        and (namespace is None or o["metadata"].get("namespace") == namespace)
    ]
    return obj


def grants(objects: list[Obj], account: str) -> list[tuple[str, Obj, Obj]]:
    """(scope, binding, role) for every binding of the account."""
    out = []
    for binding in objects:
        if binding["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        if not any(s.get("kind") == "ServiceAccount" and s["name"] == account for s in binding["subjects"]):
            continue
        namespace = binding["metadata"].get("namespace") if binding["roleRef"]["kind"] == "Role" else None
        role = _find(objects, binding["roleRef"]["kind"], binding["roleRef"]["name"], namespace)
        out.append(("cluster" if binding["kind"] == "ClusterRoleBinding" else "namespace", binding, role))
    return out


def granted(objects: list[Obj], account: str) -> set[Rule]:
    """The account's rules as (group, resource, verb, scope), resourceNames left aside."""
    return {
        (group, resource, verb, scope)
        for scope, _binding, role in grants(objects, account)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def table(objects: list[Obj]) -> str:
    """docs/deploy.md's RBAC table: each account's rules as the manifests grant them, and the
    calls of its code that need each rule."""
    lines = [
        "| account | where | API group | resource | verbs | names | needed by |",
        "|---|---|---|---|---|---|---|",
    ]
    for account in ACCOUNTS:
        adapter, _ = ACCOUNTS[account]
        calls = calls_of(account)
        table_ = permissions(adapter)
        for scope, binding, role in sorted(grants(objects, account), key=lambda g: g[0]):
            where = "cluster" if scope == "cluster" else f"namespace `{binding['metadata']['namespace']}`"
            for rule in role["rules"]:
                for group in rule["apiGroups"]:
                    for resource in rule["resources"]:
                        users = sorted(
                            c for c in calls for r in table_[c]
                            if r[:2] == (group, resource) and r[2] in rule["verbs"] and r[3] == scope
                        )
                        lines.append(
                            f"| `{account}` | {where} | {f'`{group}`' if group else 'core'} | {resource} "
                            f"| {', '.join(rule['verbs'])} | {', '.join(rule.get('resourceNames') or []) or 'any'} "
                            f"| {', '.join(f'`{u}`' for u in dict.fromkeys(users))} |"
                        )
    return "\n".join(lines) + "\n"


BEGIN = "<!-- rbac-table: generated from daemonset/ by `python -m tests.helpers.rbac_calls`; do not edit -->\n"
END = "<!-- /rbac-table -->\n"
DOC = ROOT / "docs" / "deploy.md"


def document_with_table(text: str, generated: str) -> str:
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    return head + BEGIN + generated + END + tail


def main() -> None:  # pragma: no cover - a docs tool
    import tempfile

    with tempfile.TemporaryDirectory() as work:
        generated = table(built(Path(work)))
    DOC.write_text(document_with_table(DOC.read_text(), generated))
    print(f"wrote the RBAC table of {DOC}", file=sys.stderr)


if __name__ == "__main__":
    main()
