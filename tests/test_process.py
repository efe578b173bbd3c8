"""The process helpers' free ports (the child processes themselves are exercised by every
test that starts a consumer, a broker or a Redis)."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamdedup import process
from streamdedup.errors import StreamdedupError
from streamdedup.process import free_port, port_free


def test_a_paired_port_and_its_pair_are_free_and_below_the_ephemeral_range() -> None:
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    for _ in range(50):
        port = free_port(paired=10000)
        assert port >= 20000 and port + 10000 < low
        assert port_free("127.0.0.1", port) and port_free("127.0.0.1", port + 10000)


def test_a_port_whose_pair_is_taken_is_never_chosen(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Three candidates (the range starts at 30,003), of which only 20,001 has its pair
    free; when it is to be avoided too, the error says so (no OS-chosen port: its pair
    would be anyone's)."""
    ports = tmp_path / "ip_local_port_range"
    ports.write_text("30003\t60999\n")
    monkeypatch.setattr(process, "_EPHEMERAL_RANGE", ports)
    monkeypatch.setattr(process, "port_free",
                        lambda host, port: port in (20000, 20001, 20002, 30001))
    assert {free_port(paired=10000) for _ in range(20)} == {20001}
    with pytest.raises(StreamdedupError, match="no free port pair 10000 apart"):
        free_port(avoid=[20001], paired=10000)
