"""scheduler/cluster/kube_http.py `usable`: the lean transport stands in for the kubernetes client
only where it reproduces the connection, read from the client's own `Configuration` fields."""

from __future__ import annotations

import pytest
from kubernetes.client import Configuration

from scheduler.cluster.kube_http import usable


def configuration(host: str = "https://127.0.0.1:6443", **fields: object) -> Configuration:
    made = Configuration(host=host)
    for name, value in fields.items():
        setattr(made, name, value)
    return made


def test_a_plain_http_or_https_configuration_is_served_by_the_lean_transport() -> None:
    assert usable(configuration())
    assert usable(configuration("http://127.0.0.1:8080"))
    assert usable(configuration(assert_hostname=True, ca_cert_data="-----BEGIN CERTIFICATE-----"))


@pytest.mark.parametrize(("field", "value"), [
    ("proxy", "http://proxy.example:3128"),
    ("tls_server_name", "api.internal"),
    ("assert_hostname", False),
    ("assert_hostname", "another.name"),
    ("socket_options", [(6, 1, 1)]),  # TCP_NODELAY, as urllib3 spells it
])
def test_what_it_does_not_reproduce_goes_through_the_clients_own_path(field: str, value: object) -> None:
    assert not usable(configuration(**{field: value}))


def test_a_scheme_other_than_http_goes_through_the_clients_own_path() -> None:
    assert not usable(configuration("unix:///run/kube.sock"))
