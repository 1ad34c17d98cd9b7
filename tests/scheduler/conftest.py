"""Fixtures shared by the scheduler's tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from scheduler.extender.app import create_app
from scheduler.extender.core import Extender
from tests.helpers.sched_extender import make_extender


@pytest.fixture
def active() -> Iterator[tuple[Extender, TestClient]]:
    """An active extender over fixed telemetry (tests/helpers/sched_extender.py) and a client."""
    extender = make_extender("active")
    with TestClient(create_app(extender, manage_store=False)) as client:
        yield extender, client
