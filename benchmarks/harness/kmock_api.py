"""kmock's KubernetesEmulator, completed where a scheduler needs it (`ClusterEmulator`; served from
a thread by benchmarks/harness/standalone_kmock.py).

The stock emulator stores and streams objects, but a scheduler also relies on:

* `POST …/pods/NAME/binding` (the Binding subresource): sets `spec.nodeName` once; a second
  binding of a bound pod is 409 Conflict, as in the API server. Every attempt is recorded.
* `POST …/pods/NAME/eviction` (the Eviction subresource, policy/v1), as the API server's
  eviction REST handler does it: 404 for a missing pod, 409 when `deleteOptions.preconditions.uid`
  names another pod, 500 when more than one PodDisruptionBudget selects the pod, 429 when its
  budget's `status.disruptionsAllowed` is below 1; otherwise the budget's allowance drops by one
  and the pod is deleted (201). Every attempt is recorded.
* `PUT` (replace) with optimistic concurrency: a stale `metadata.resourceVersion` is 409
  Conflict — what Lease-based leader election depends on;
* `metadata.uid`, `resourceVersion`, `creationTimestamp` on create; `resourceVersion` bumped on
  every change;
* a watch that cannot miss an event between its initial listing and its live part.

"""

from __future__ import annotations

import asyncio
import datetime
import functools
import itertools
import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

import aiohttp.web
import kmock
from kmock._internal import rendering  # the emulator's own extension point


@dataclass(frozen=True)
class EvictionAttempt:
    namespace: str
    pod: str
    status: int  # the answer's HTTP status (201: evicted)
    agent: str = ""  # the client's User-Agent: which replica asked


@dataclass(frozen=True)
class BindingAttempt:
    namespace: str
    pod: str
    node: str
    accepted: bool
    agent: str = ""  # the client's User-Agent: which replica asked


def _check_precondition(stored: Any, body: Mapping[str, Any]) -> None:
    """409 Conflict when `body` names a resourceVersion other than the stored object's."""
    wanted = (body.get("metadata") or {}).get("resourceVersion")
    if wanted is not None and wanted != stored.get("metadata", {}).get("resourceVersion"):
        raise kmock.KubernetesError(409, "Conflict", "the object has been modified")


def _now() -> str:
    return datetime.datetime.now(tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class ClusterEmulator(kmock.KubernetesEmulator):
    """KubernetesEmulator plus bindings, resourceVersions, replace-with-precondition — and
    served directly: kmock matches every request against its reactions by scanning every
    request served so far, which makes a long run quadratic. This emulator keeps kmock's server,
    request parsing, object store and event buses, and answers API requests itself."""

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        self._versions = itertools.count(1)
        self.bindings: list[BindingAttempt] = []
        self.evictions: list[EvictionAttempt] = []
        self.fail_next_bindings = 0  # inject API errors (500) into the next N bindings

    def _next_version(self) -> str:
        return str(next(self._versions))

    async def _publish(self, resource: kmock.resource, kind: str, raw: dict[str, Any]) -> None:
        await self._buses[resource].put({"type": kind, "object": raw})

    async def _handle(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        if len(self._requests) > 100:
            self._requests.clear()  # kmock keeps every request for assertions; we do not use them
        if request.resource is None:  # discovery, /version, …: kmock's own answers
            return await super()._handle(request)
        method = str(request.method.value).upper() if request.method is not None else ""
        if request.name is not None and request.subresource == "binding" and method == "POST":
            return await self._bind(request)
        if request.name is not None and request.subresource == "eviction" and method == "POST":
            return await self._evict(request)
        if request.name is not None and request.subresource in (None, "status"):
            if method == "PUT":
                return await self._replace(request)
            if method == "PATCH":
                return await self._patch(request)
            if method == "GET" and request.action != kmock.action.WATCH:
                async with self._lock:
                    return aiohttp.web.json_response(self._stored(request).raw)
            if method == "DELETE":
                return await self._delete(request)
        if request.name is None and method == "POST":
            return await self._create(request)
        if request.action == kmock.action.LIST:
            async with self._lock:
                items = [obj.raw for obj in self._matching(request)]
            return aiohttp.web.json_response({"metadata": {"resourceVersion": ""}, "items": items})
        if request.action == kmock.action.WATCH:
            return await self._watch(request)
        return await super()._handle(request)

    def _key(self, request: rendering.Request, name: str | None = None) -> Any:
        return (request.resource, request.namespace, name or request.name)

    def _stored(self, request: rendering.Request) -> Any:
        key = self._key(request)
        if key not in self._objects or self._objects[key].deleted:
            raise kmock.KubernetesObjectNotFoundError()
        return self._objects[key]

    def _matching(self, request: rendering.Request) -> list[Any]:
        return [
            obj
            for (res, ns, _), obj in self._objects.items()
            if res == request.resource
            and not obj.deleted
            and (request.namespace is None or ns == request.namespace)
        ]

    async def _create(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        assert request.resource is not None
        body = dict(request.data or {})
        meta = dict(body.get("metadata") or {})
        name = meta.get("name")
        if not name:
            raise kmock.KubernetesError(422, "Invalid", "metadata.name is required")
        if request.namespace:
            meta["namespace"] = request.namespace
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", _now())
        async with self._lock:
            meta["resourceVersion"] = self._next_version()
            body["metadata"] = meta
            key = self._key(request, name)
            if key in self._objects and not self._objects[key].deleted:
                raise kmock.KubernetesError(409, "AlreadyExists", f"{name} already exists")
            if key in self._objects:
                self._objects[key].create(body)
            else:
                self._objects[key] = body
            raw = self._objects[key].raw
            await self._publish(request.resource, "ADDED", raw)
        return aiohttp.web.json_response(raw, status=201)

    async def _change(
        self, request: rendering.Request, event: str, change: Callable[[Any], None]
    ) -> aiohttp.web.StreamResponse:
        """Apply `change` to the stored object, publish `event`, answer with the object (as it
        was, for a deletion)."""
        assert request.resource is not None
        async with self._lock:
            obj = self._stored(request)
            before = obj.raw
            change(obj)
            raw = before if event == "DELETED" else obj.raw
            await self._publish(request.resource, event, raw)
        return aiohttp.web.json_response(raw)

    async def _patch(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        patch = dict(request.data or {})

        def apply(obj: Any) -> None:
            _check_precondition(obj, patch)
            meta = {**(patch.get("metadata") or {}), "resourceVersion": self._next_version()}
            obj.patch({**patch, "metadata": meta})

        return await self._change(request, "MODIFIED", apply)

    async def _delete(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        return await self._change(request, "DELETED", lambda obj: obj.delete())

    async def _replace(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        body = dict(request.data or {})

        def apply(obj: Any) -> None:
            _check_precondition(obj, body)
            old_meta = obj.get("metadata", {})
            meta = {
                **(body.get("metadata") or {}),
                "uid": old_meta.get("uid"),
                "creationTimestamp": old_meta.get("creationTimestamp"),
                "resourceVersion": self._next_version(),
            }
            obj.create({**body, "metadata": meta})

        return await self._change(request, "MODIFIED", apply)

    async def _bind(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        assert request.resource is not None
        target = str(((request.data or {}).get("target") or {}).get("name") or "")
        agent = request.headers.get("User-Agent", "")
        attempt = functools.partial(
            BindingAttempt, request.namespace or "", request.name or "", target, agent=agent
        )
        async with self._lock:
            obj = self._stored(request)
            if self.fail_next_bindings > 0:
                self.fail_next_bindings -= 1
                self.bindings.append(attempt(accepted=False))
                raise kmock.KubernetesError(500, "InternalError", "injected binding failure")
            bound = obj.get("spec", {}).get("nodeName")
            wanted_uid = ((request.data or {}).get("metadata") or {}).get("uid")
            uid_ok = wanted_uid in (None, obj.get("metadata", {}).get("uid"))
            accepted = not bound and bool(target) and uid_ok
            self.bindings.append(attempt(accepted=accepted))
            if not accepted:
                raise kmock.KubernetesError(
                    409, "Conflict", f"pod {request.name} is already assigned to node {bound}"
                )
            obj.patch(
                {
                    "spec": {"nodeName": target},
                    "metadata": {"resourceVersion": self._next_version()},
                }
            )
            await self._publish(request.resource, "MODIFIED", obj.raw)
        status = {
            "apiVersion": "v1",
            "kind": "Status",
            "metadata": {},
            "status": "Success",
            "code": 201,
        }
        return aiohttp.web.json_response(status, status=201)

    def _budgets(self, namespace: str, labels: Mapping[str, str]) -> list[Any]:
        """The stored PodDisruptionBudgets whose selector (matchLabels, and matchExpressions
        with In / NotIn / Exists / DoesNotExist) selects a pod of `namespace` with `labels`."""

        def holds(e: Mapping[str, Any]) -> bool:
            key, op, values = e.get("key"), e.get("operator"), e.get("values") or []
            present = key in labels
            return {"In": present and labels.get(key) in values,
                    "NotIn": not (present and labels.get(key) in values),
                    "Exists": present, "DoesNotExist": not present}.get(op, False)

        found = []
        for (res, ns, _), obj in self._objects.items():
            if res.plural != "poddisruptionbudgets" or obj.deleted or ns != namespace:
                continue
            selector = (obj.get("spec") or {}).get("selector")
            if selector is None:
                continue
            match = selector.get("matchLabels") or {}
            if all(labels.get(k) == v for k, v in match.items()) and all(
                holds(e) for e in selector.get("matchExpressions") or ()
            ):
                found.append(obj)
        return found

    async def _evict(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        assert request.resource is not None
        namespace, name = request.namespace or "", request.name or ""
        agent = request.headers.get("User-Agent", "")

        def answer(status: int, reason: str, message: str) -> NoReturn:
            self.evictions.append(EvictionAttempt(namespace, name, status, agent))
            raise kmock.KubernetesError(status, reason, message)

        async with self._lock:
            key = self._key(request)
            if key not in self._objects or self._objects[key].deleted:
                answer(404, "NotFound", f'pods "{name}" not found')
            pod = self._objects[key]
            wanted = (((request.data or {}).get("deleteOptions") or {}).get("preconditions") or {})
            if wanted.get("uid") not in (None, pod.get("metadata", {}).get("uid")):
                answer(409, "Conflict", "Precondition failed: UID in precondition does not match")
            budgets = self._budgets(namespace, pod.get("metadata", {}).get("labels") or {})
            if len(budgets) > 1:
                answer(500, "InternalError", "This pod has more than one PodDisruptionBudget")
            if budgets:
                budget = budgets[0]
                allowed = int((budget.get("status") or {}).get("disruptionsAllowed") or 0)
                if allowed < 1:
                    answer(429, "TooManyRequests",
                           "Cannot evict pod as it would violate the pod's disruption budget.")
                budget.patch({"status": {"disruptionsAllowed": allowed - 1},
                              "metadata": {"resourceVersion": self._next_version()}})
                pdb_resource = next(r for (r, _, _), o in self._objects.items() if o is budget)
                await self._publish(pdb_resource, "MODIFIED", budget.raw)
            before = pod.raw
            pod.delete()
            await self._publish(request.resource, "DELETED", before)
            self.evictions.append(EvictionAttempt(namespace, name, 201, agent))
        status = {"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Success",
                  "code": 201}
        return aiohttp.web.json_response(status, status=201)

    async def _watch(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        # Join the event bus while still holding the lock that the initial listing holds, so no
        # event falls between the two (kmock's own watch releases the lock in between).
        assert request.resource is not None and request._raw_request is not None
        bus = self._buses[request.resource]
        async with self._lock:
            mark = await bus.mark()
            events = [{"type": "ADDED", "object": obj.raw} for obj in self._matching(request)]
        response = aiohttp.web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request._raw_request)
        try:
            await response.write(b"".join(json.dumps(e).encode() + b"\n" for e in events))
            async for event in bus.stream(since=mark):
                ns = event.get("object", {}).get("metadata", {}).get("namespace")
                if request.namespace is None or ns == request.namespace:
                    await response.write(json.dumps(event).encode() + b"\n")
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            await bus.unmark(mark)
        return response
