"""The port a stack's service starts on is never one the kernel hands out meanwhile.

A port found free by binding port 0 comes from the kernel's ephemeral range, from which
every outgoing connection takes its own port too: on CI's busiest minutes one was taken
in the seconds before the API server meant for it bound it, that server could not
start, and another stack's server answered the wait for it.
"""

from __future__ import annotations

import random
import socket
from collections.abc import Sequence
from pathlib import Path

import pytest

from devstack.stack import LOWEST_SERVICE_PORT, _ephemeral_ports, free_port


def test_a_service_port_is_free_and_outside_the_ephemeral_range() -> None:
    ephemeral = _ephemeral_ports()
    ports = {free_port() for _ in range(50)}
    assert [port for port in ports if port in ephemeral] == []
    assert min(ports) >= LOWEST_SERVICE_PORT
    for port in sorted(ports)[:5]:
        with socket.socket() as server:
            server.bind(("127.0.0.1", port))  # free: a service binds it


def test_the_ephemeral_range_is_the_kernels() -> None:
    low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
    assert _ephemeral_ports() == range(int(low), int(high) + 1)
    with socket.socket() as client:  # an outgoing connection's own port comes from it
        client.bind(("127.0.0.1", 0))
        assert client.getsockname()[1] in _ephemeral_ports()


def test_a_port_is_handed_out_once_even_when_the_draw_repeats(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A stack's two API servers, or a test's two proxies, each get a port of their own:
    two ports found free before either is bound may be the same one."""

    def same_draw(population: Sequence[int], k: int) -> list[int]:
        return list(population[:k])

    monkeypatch.setattr(random, "sample", same_draw)
    first, second = free_port(), free_port()
    assert first != second
