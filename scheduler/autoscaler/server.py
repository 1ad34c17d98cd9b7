"""The gRPC expander server: cluster-autoscaler's `grpc` expander calls it to pick a node group.

cluster-autoscaler (`--expander=grpc`, `--grpc-expander-url`, `--grpc-expander-cert`) calls
`grpcplugin.Expander/BestOptions` with a 5 s deadline over TLS, trusting the certificate file
it is given (no client certificate). The answer is the single least-energy option
(scheduler/decisions/expansion.py), or every option when no group's curve is known. On an error
status cluster-autoscaler keeps all its options; an OK answer with no options would make it
(≥ 1.32) scale up nothing, so a non-empty request never gets one.

| metric | type | labels |
|---|---|---|
| `kubejoule_expander_requests_total` | counter | `code`: OK, INVALID_ARGUMENT, INTERNAL; `form`: messages, bytes, both, unknown |
| `kubejoule_expander_choices_total` | counter | `node_group`, `curve_source`: config, label, running, none (none: every option returned) |
| `kubejoule_expander_request_seconds` | histogram | — (decode, choose, encode) |
| `kubejoule_expander_unpriced_options_total` | counter | `reason`: no_curve, no_template |
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent import futures
from dataclasses import dataclass, field

import grpc
from prometheus_client import CollectorRegistry

from common.curves import PowerCurve
from common.metrics import MetricSpec
from scheduler.autoscaler import DEFAULT_MAX_REQUEST_BYTES
from scheduler.autoscaler.messages import (
    ParsedRequest,
    RequestError,
    decode_request,
    parse_request,
)
from scheduler.autoscaler.protos import expander_pb2
from scheduler.autoscaler.tls import serve_tls
from scheduler.decisions.expansion import (
    DEFAULT_GROUP_LABELS,
    GroupOption,
    rank_options,
    resolve_curve,
)
from scheduler.plugins.energy import DEFAULT_CONSOLIDATION_UTILIZATION
from scheduler.service.metrics import LATENCY_BUCKETS_SECONDS

log = logging.getLogger("kubejoule.expander")

SERVICE = "grpcplugin.Expander"
METHOD = "BestOptions"
SOURCE_NONE = "none"

REQUESTS = MetricSpec(
    "kubejoule_expander_requests", "counter", "BestOptions calls by status code and protocol form.", ("code", "form")
)
CHOICES = MetricSpec(
    "kubejoule_expander_choices", "counter", "Node groups answered, by where their power curve came from.",
    ("node_group", "curve_source"),
)
REQUEST_SECONDS = MetricSpec(
    "kubejoule_expander_request_seconds", "histogram",
    "Seconds to decode a BestOptions request, choose and encode the answer.",
)
UNPRICED_OPTIONS = MetricSpec(
    "kubejoule_expander_unpriced_options", "counter", "Options that could not be priced, by reason.", ("reason",)
)


class ExpanderMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.requests = REQUESTS.counter(self.registry)
        self.choices = CHOICES.counter(self.registry)
        self.seconds = REQUEST_SECONDS.histogram(self.registry, LATENCY_BUCKETS_SECONDS)
        self.unpriced = UNPRICED_OPTIONS.counter(self.registry)

    def value(self, name: str, labels: Mapping[str, str] | None = None) -> float | None:
        return self.registry.get_sample_value(name, dict(labels or {}))


@dataclass
class Expander:
    """Chooses among cluster-autoscaler's options; `answer()` is the whole BestOptions call."""

    node_groups: Mapping[str, PowerCurve] = field(default_factory=dict)
    label_keys: Sequence[str] = DEFAULT_GROUP_LABELS
    reference_utilization: float = DEFAULT_CONSOLIDATION_UTILIZATION
    # (label key, value) of running nodes → the curve their agents export; None: not used.
    running_curves: Callable[[], Mapping[tuple[str, str], PowerCurve]] | None = None
    metrics: ExpanderMetrics = field(default_factory=ExpanderMetrics)

    def choose(self, options: Sequence[GroupOption]) -> tuple[list[GroupOption], str]:
        """The options to answer and where the winner's curve came from (SOURCE_NONE when
        none is known and every option is answered)."""
        running = self.running_curves() if self.running_curves is not None else None
        curves: dict[str, PowerCurve | None] = {}
        sources: dict[str, str] = {}
        for option in options:
            if option.group_id in curves:
                continue
            found = resolve_curve(
                option.group_id, option.template, self.node_groups, self.label_keys, running
            )
            curves[option.group_id] = found[0] if found else None
            sources[option.group_id] = found[1] if found else SOURCE_NONE
            if found is None:
                self.metrics.unpriced.labels("no_curve").inc()
        ranked = rank_options(options, curves, self.reference_utilization)
        if not ranked:
            return list(options), SOURCE_NONE
        best = ranked[0]
        log.info(
            "scale-up choice: %s (%d node(s), %d pod(s), %.2f W per core, %.1f W expected) "
            "among %d option(s)",
            best.option.group_id, best.option.node_count, len(best.option.pods),
            best.watts_per_core, best.expected_watts, len(options),
        )
        return [best.option], sources[best.option.group_id]

    def answer(self, data: bytes) -> bytes:
        """The encoded BestOptionsResponse for an encoded request; RequestError for a request
        that cannot be read."""
        return self._respond(parse_request(decode_request(data)))

    # -- gRPC ---------------------------------------------------------------------------------

    def handle(self, data: bytes, context: grpc.ServicerContext) -> bytes:
        start = time.perf_counter()
        form = "unknown"
        try:
            request = decode_request(data)
            parsed = parse_request(request)
            form = parsed.form
            body = self._respond(parsed)
        except RequestError as exc:
            self._count("INVALID_ARGUMENT", form, start)
            log.warning("BestOptions: invalid request: %s", exc)
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc)[:1000])
        except Exception as exc:  # never let one request take the server down
            self._count("INTERNAL", form, start)
            log.exception("BestOptions: unexpected error")
            context.abort(grpc.StatusCode.INTERNAL, f"kubejoule expander error: {exc!r}"[:1000])
        self._count("OK", form, start)
        return body

    def _respond(self, parsed: ParsedRequest) -> bytes:
        for _ in parsed.missing_templates:
            self.metrics.unpriced.labels("no_template").inc()
        if parsed.missing_templates:
            log.warning("no template node for node group(s) %s", ", ".join(parsed.missing_templates))
        chosen, source = self.choose(parsed.options)
        response = expander_pb2.BestOptionsResponse()
        for option in chosen:
            response.options.add(
                nodeGroupId=option.group_id, nodeCount=option.node_count, debug=option.debug
            )
            self.metrics.choices.labels(option.group_id, source).inc()
        return response.SerializeToString()

    def _count(self, code: str, form: str, start: float) -> None:
        self.metrics.requests.labels(code, form).inc()
        self.metrics.seconds.observe(time.perf_counter() - start)

    def generic_handler(self) -> grpc.GenericRpcHandler:
        # Raw bytes in and out: the handler decodes, so a request that is not protobuf gets
        # INVALID_ARGUMENT with a message rather than grpcio's bare deserialization error.
        return grpc.method_handlers_generic_handler(
            SERVICE, {METHOD: grpc.unary_unary_rpc_method_handler(self.handle)}
        )


def start_server(
    expander: Expander,
    host: str,
    port: int,
    certificate_pem: bytes,
    private_key_pem: bytes,
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
    workers: int = 4,
) -> tuple[grpc.Server, int]:
    """Start the TLS gRPC server (no client certificate); returns it and the bound port."""
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="expander"),
        handlers=[expander.generic_handler()],
        options=[
            ("grpc.max_receive_message_length", max_request_bytes),
            ("grpc.max_send_message_length", max_request_bytes),
        ],
    )
    return server, serve_tls(server, host, port, certificate_pem, private_key_pem)
