"""One decision of the standalone scheduler, through scheduling profiles.

The scheduler's profile (the `profile:` key of its configuration, `kubejoule_profile()` by
default) filters every node of the cluster cache and scores the feasible ones;
kube-scheduler's default profile (`default_profile()`) scores the same nodes, so each decision
says where kube-scheduler would have put the pod. Each picks its best total with
`select_best` (ties at random, as kube-scheduler's selectHost). `shadow` mode binds to the
default profile's pick, `active` mode to the scheduler's profile's.

With `percentage_of_nodes_to_score`, only the nodes kube-scheduler's percentageOfNodesToScore
rule would find are scored (`scheduler.framework.nodes_to_score`); by default every feasible node is.

`ProfileDecider` keeps one CandidateBatch over the cache's NodeTable and patches the rows whose
state changed since the previous pod (usually the node that pod was assumed on), so the
plugins' per-node columns are computed once per node state, not once per pod. After a
telemetry refresh every node's state is new: a background thread stages the new table
(`ClusterCache.stage`) and its batch (`prepare`: every plugin's per-node columns computed by
scoring a pod over it), and the next decision adopts both, patching only the rows changed since
— the first decision after a refresh costs what any other does.
"""

from __future__ import annotations

import random

import numpy as np

from scheduler.cluster.node_table import NodeTable
from scheduler.domain.model import PodInfo
from scheduler.framework.batch import CORE_COLUMNS, CandidateBatch
from scheduler.framework.decision import (
    MODE_ACTIVE,
    MODE_SHADOW,
    MODES,
    REASON_PROFILE,
    Decision,
)
from scheduler.framework.interface import ScorePlugin
from scheduler.framework.nodes_to_score import NodesToScore
from scheduler.framework.scheduling_profile import SchedulingProfile, select_best
from scheduler.plugins import energy as energy_plugin_module
from scheduler.plugins.defaults import default_profile
from scheduler.plugins.extender import ExtenderScore

__all__ = ["MODE_ACTIVE", "MODE_SHADOW", "MODES", "Decision", "ProfileDecider", "energy_of", "entry_scores"]


def same_plugin(a: ScorePlugin, b: ScorePlugin) -> bool:
    """Two instances that score alike: same class, name and arguments."""
    return type(a) is type(b) and a.name == b.name and vars(a) == vars(b)


def energy_of(profile: SchedulingProfile) -> tuple[ScorePlugin, energy_plugin_module.EnergyPlugin] | None:
    """(profile entry, energy plugin) for the profile's energy plugin (the one that explains
    its scores in watts), if any; the entry is an `ExtenderScore` when the plugin enters
    through the extender's view, else the plugin itself."""
    for plugin, _ in profile.scores:
        inner = plugin.plugin if isinstance(plugin, ExtenderScore) else plugin
        if isinstance(inner, energy_plugin_module.EnergyPlugin):
            return plugin, inner
    return None


def entry_scores(entry: ScorePlugin, energy_scores: np.ndarray) -> np.ndarray:
    """The profile entry's scores from its energy plugin's (`energy_of`), as the entry would
    compute them: the energy plugin has no NormalizeScore, so the plugin's own entry scores
    `energy_scores`; the extender's view of it, what kube-scheduler makes of them."""
    if isinstance(entry, ExtenderScore):
        return entry.seen_by_kube_scheduler(energy_scores)
    return energy_scores


class ProfileDecider:
    """Decisions over the cache's NodeTable (module docstring). One per scheduling thread."""

    # More changed rows than 1/REBUILD_FRACTION of the table (a telemetry refresh): rebuild the
    # batch instead of patching it row by row.
    REBUILD_FRACTION = 4

    def __init__(
        self,
        profile: SchedulingProfile,
        comparison: SchedulingProfile | None = None,
        percentage_of_nodes_to_score: int | None = None,
    ) -> None:
        self.profile = profile
        self.comparison = comparison if comparison is not None else default_profile()
        self.nodes_to_score = NodesToScore(percentage_of_nodes_to_score)
        found = energy_of(profile)
        self.energy_entry: ScorePlugin | None = found[0] if found is not None else None
        self.energy: energy_plugin_module.EnergyPlugin | None = found[1] if found is not None else None
        mine = {plugin.name: plugin for plugin, _ in profile.scores}
        # The comparison's plugins the profile runs too: their scores are reused.
        self._shared = [
            plugin.name
            for plugin, _ in self.comparison.scores
            if plugin.name in mine and same_plugin(plugin, mine[plugin.name])
        ]
        self._batch: CandidateBatch | None = None
        self._layout = -1
        self._versions = np.zeros(0, dtype=np.int64)
        # The last sub-batch of candidates and its rows: the same rows next time (the same nodes
        # full, tainted or cordoned) reuse it, patched with the rows changed since it was last
        # brought up to date, instead of slicing every column anew. None after a rebuild.
        self._sub: CandidateBatch | None = None
        self._sub_rows = np.zeros(0, dtype=np.intp)
        self._sub_stale: set[int] = set()
        # (table, its batch, the table's row versions then): staged by prepare(), adopted by
        # batch() when the cache hands out that table.
        self._staged: tuple[NodeTable, CandidateBatch, np.ndarray] | None = None
        self.last_pod: PodInfo | None = None

    def prepare(self, table: NodeTable, now: float, pod: PodInfo) -> None:
        """Build the batch of a staged `table` and every plugin's per-node columns over it (by
        filtering and scoring `pod`, usually the last one decided), for batch() to adopt. Runs
        in a background thread: the spec-only columns of the current batch are carried over."""
        current = self._batch
        kept = current.info_only_entries(table.states) if current is not None and (
            self._layout == table.layout_version) else {}
        columns = {name: getattr(table, name).copy() for name in CORE_COLUMNS}
        batch = CandidateBatch(table.states, now, columns, kept)
        versions = table.row_version.copy()
        self.profile.feasible(pod, batch)
        scored = self.profile.score(pod, batch)
        self.comparison.score(pod, batch, {name: scored.of(name) for name in self._shared})
        self._staged = (table, batch, versions)

    def batch(self, table: NodeTable, now: float) -> CandidateBatch:
        """The candidate batch of every node in `table`, brought up to date."""
        staged = self._staged
        if staged is not None and staged[0] is table:
            self._staged = None
            self._batch, self._versions = staged[1], staged[2]
            self._layout = table.layout_version
            self._sub = None
        batch = self._batch
        changed = None
        if batch is not None and self._layout == table.layout_version:
            changed = np.flatnonzero(table.row_version != self._versions)
        if batch is None or changed is None or len(changed) * self.REBUILD_FRACTION > len(table):
            columns = {name: getattr(table, name).copy() for name in CORE_COLUMNS}
            # Same nodes (their pods, telemetry or specs changed in place): spec-only columns
            # carry over, rebuilt for the nodes whose spec changed.
            kept = {} if changed is None else batch.info_only_entries(table.states)  # type: ignore[union-attr]
            batch = self._batch = CandidateBatch(table.states, now, columns, kept)
            self._layout = table.layout_version
            self._sub = None
        elif len(changed):
            rows = changed.tolist()
            batch.update(rows, [table.states[row] for row in rows])
            self._sub_stale.update(rows)
        self._versions = table.row_version.copy()
        return batch.at(now)

    def candidates(self, batch: CandidateBatch, rows: np.ndarray) -> CandidateBatch:
        """`batch.take(rows)`, reusing the previous sub-batch when the rows are the same."""
        sub = self._sub
        if sub is None or len(rows) != len(self._sub_rows) or not np.array_equal(rows, self._sub_rows):
            sub = batch.take(rows)
            self._sub = sub if sub is not batch else None
            self._sub_rows = rows.copy()
            self._sub_stale = set()
            return sub
        if self._sub_stale:
            where = np.flatnonzero(np.isin(rows, list(self._sub_stale)))
            sub.copy_rows(where.tolist(), batch, rows[where].tolist())
            self._sub_stale = set()
        return sub.at(batch.now)

    def decide(
        self, pod: PodInfo, table: NodeTable, mode: str, rng: random.Random, now: float
    ) -> Decision:
        """Filter, score with both profiles, choose. `now` is wall-clock seconds."""
        self.last_pod = pod
        batch = self.batch(table, now)
        mask = self.profile.feasible(pod, batch)
        rows = self.nodes_to_score.select(mask)
        decision = Decision(pod, total_nodes=len(table), feasible_nodes=int(mask.sum()))
        if len(rows) == 0:
            decision.summary = self.profile.failure_summary(pod, batch)
            return decision
        candidates = self.candidates(batch, rows)
        decision.states = list(candidates.states)
        decision.node_names = candidates.names
        given: dict[str, np.ndarray] = {}
        energy = self.energy
        if energy is not None:
            evaluated = energy.evaluate(pod, candidates)
            # The profile's entry gets these scores too, as it would compute them.
            entry = self.energy_entry
            assert entry is not None  # found with the plugin
            given[entry.name] = entry_scores(entry, evaluated.score)
            decision.score = np.asarray(evaluated.score, dtype=np.float64)
            decision.delta_watts = np.asarray(evaluated.delta_watts, dtype=np.float64)
            decision.reason_codes = np.asarray(evaluated.reason)
            decision.reason_names = energy_plugin_module.REASONS
        scored = self.profile.score(pod, candidates, given)
        if energy is None:
            decision.score = scored.total.astype(np.float64)
            decision.delta_watts = np.full(len(rows), np.nan)
            decision.reason_codes = np.zeros(len(rows), dtype=np.int8)
            decision.reason_names = (REASON_PROFILE,)
        shared = {name: scored.of(name) for name in self._shared}
        default = self.comparison.score(pod, candidates, shared)
        decision.total = scored.total
        decision.default_total = default.total
        names = decision.names
        decision.default_choice = names[select_best(default.total, rng)]
        decision.recommended = names[select_best(scored.total, rng)]
        decision.chosen = decision.recommended if mode == MODE_ACTIVE else decision.default_choice
        return decision
