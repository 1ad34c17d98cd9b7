"""kubejoule / Scheduler: the energy-aware scheduler's and extender's decisions, fallbacks,
telemetry, latency and leader."""

from __future__ import annotations

from grafana_foundation_sdk.models.dashboard import Dashboard

from .board import dashboard
from .panels import bar_gauge, graph, query, stat_tile


def scheduler() -> Dashboard:
    return dashboard(
        "kubejoule-scheduler",
        "kubejoule / Scheduler",
        "The energy-aware scheduler and extender: decisions, fallbacks, telemetry age, shadow "
        "recommendations against actual placements.",
        [],
        [
            graph(
                "Scheduling attempts",
                "Standalone scheduler attempts per second by result.",
                query(
                    "sum by (result) (rate(kubejoule_scheduler_schedule_attempts_total[$__rate_interval]))",
                    "{{result}}",
                ),
                unit="short",
            ),
            graph(
                "Recommendations",
                "Energy recommendations per second by mode (shadow: recorded only).",
                query(
                    "sum by (mode) (rate(kubejoule_scheduler_recommendations_total[$__rate_interval]))",
                    "{{mode}}",
                ),
                unit="short",
            ),
            stat_tile(
                "Shadow recommendation = actual placement",
                "Share of placements where the energy "
                "recommendation equals the node the default scoring chose (time range).",
                query(
                    'sum(increase(kubejoule_scheduler_recommendation_agreements_total{agree="true"}[$__range])) / '
                    "sum(increase(kubejoule_scheduler_recommendation_agreements_total[$__range]))",
                    "agree",
                    instant=True,
                ),
                unit="percentunit",
                width=6,
                height=8,
            ),
            bar_gauge(
                "Recommended vs placed",
                "Placements whose recommendation agreed or differed (time range).",
                query(
                    "sum by (agree) (increase(kubejoule_scheduler_recommendation_agreements_total[$__range]))",
                    "agree={{agree}}",
                    instant=True,
                ),
                unit="short",
                width=6,
            ),
            graph(
                "Fallbacks by reason",
                "Nodes scored without usable telemetry (priced at their worst state) per second.",
                query(
                    "sum by (reason) (rate(kubejoule_scheduler_fallbacks_total[$__rate_interval]))",
                    "{{reason}}",
                ),
                unit="short",
            ),
            graph(
                "Telemetry age per node",
                "Age of the newest telemetry the scheduler holds for each node; "
                "past max_staleness_seconds (30 s) the node is priced at its worst state.",
                query("max by (node) (kubejoule_scheduler_telemetry_age_seconds)", "{{node}}"),
                unit="s",
            ),
            graph(
                "Telemetry errors",
                "Telemetry refresh errors since start, by source and kind.",
                query(
                    "sum by (source, kind) (kubejoule_scheduler_telemetry_errors)",
                    "{{source}} {{kind}}",
                ),
                unit="short",
            ),
            graph(
                "Extender latency",
                "p50 and p99 time to answer kube-scheduler, by verb.",
                query(
                    "histogram_quantile(0.99, sum by (le, verb) "
                    "(rate(kubejoule_extender_request_duration_seconds_bucket[$__rate_interval])))",
                    "p99 {{verb}}",
                ),
                query(
                    "histogram_quantile(0.5, sum by (le, verb) "
                    "(rate(kubejoule_extender_request_duration_seconds_bucket[$__rate_interval])))",
                    "p50 {{verb}}",
                ),
                unit="s",
            ),
            graph(
                "Extender requests",
                "Requests per second by verb and HTTP status.",
                query(
                    "sum by (verb, code) (rate(kubejoule_extender_requests_total[$__rate_interval]))",
                    "{{verb}} {{code}}",
                ),
                unit="reqps",
            ),
            graph(
                "Nodes filtered by power cap",
                "Nodes a power cap excluded (active) or would have (shadow).",
                query(
                    "sum by (mode) (rate(kubejoule_extender_filtered_nodes_total[$__rate_interval]))",
                    "{{mode}}",
                ),
                unit="short",
            ),
            graph(
                "Scheduling latency",
                "p99 from taking a pod off the queue to its binding's answer.",
                query(
                    "histogram_quantile(0.99, sum by (le) "
                    "(rate(kubejoule_scheduler_e2e_scheduling_duration_seconds_bucket[$__rate_interval])))",
                    "p99",
                ),
                unit="s",
            ),
            graph(
                "Pending pods",
                "Pods waiting in the standalone scheduler's queue, by sub-queue.",
                query("sum by (queue) (kubejoule_scheduler_pending_pods)", "{{queue}}"),
                unit="short",
            ),
            graph(
                "Binding errors",
                "Failed binding calls per second, by kind.",
                query(
                    "sum by (kind) (rate(kubejoule_scheduler_binding_errors_total[$__rate_interval]))",
                    "{{kind}}",
                ),
                unit="short",
            ),
            graph(
                "Leader",
                "1 for the replica holding the leader Lease.",
                query("max by (instance) (kubejoule_scheduler_leader)", "{{instance}}"),
                unit="short",
            ),
        ],
    )
