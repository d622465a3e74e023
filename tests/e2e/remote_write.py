"""Prometheus remote write from the e2e suite: known series pushed into the stack's Prometheus
(started with --web.enable-remote-write-receiver), as tests/metrics_prometheus_stack.rs does in Rust.

The body is a protobuf `prometheus.WriteRequest` in a snappy block, both encoded by hand: the
formats are small, and the suite's venv has no protobuf or snappy package. The snappy block holds
the message as one literal (valid snappy, just not compressed).
"""

from __future__ import annotations

import struct
import urllib.request


def _varint(v: int) -> bytes:
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2)."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _time_series(labels: dict[str, str], samples: list[tuple[float, float]]) -> bytes:
    """`prometheus.TimeSeries`: labels sorted by name, samples (unix seconds, value)."""
    out = bytearray()
    for name in sorted(labels):
        out += _field(1, _field(1, name.encode()) + _field(2, labels[name].encode()))
    for t, v in samples:
        # value: double (field 1, fixed64); timestamp: int64 milliseconds (field 2, varint)
        sample = _varint(1 << 3 | 1) + struct.pack("<d", v) + _varint(2 << 3) + _varint(int(round(t * 1000)))
        out += _field(2, sample)
    return bytes(out)


def _snappy_literal(data: bytes) -> bytes:
    out = _varint(len(data))
    if data:
        out += bytes([63 << 2]) + struct.pack("<I", len(data) - 1) + data
    return out


def write(prometheus_url: str, series: dict[str, list[tuple[float, float]]], labels: dict[str, str]) -> None:
    """Pushes each `metric name -> samples` with the extra `labels`. Samples of one series must
    be newer than any already stored for it (Prometheus rejects out-of-order samples)."""
    request = b"".join(_field(1, _time_series({"__name__": name, **labels}, samples))
                       for name, samples in series.items())
    req = urllib.request.Request(f"{prometheus_url}/api/v1/write", data=_snappy_literal(request), method="POST",
                                 headers={"Content-Type": "application/x-protobuf",
                                          "Content-Encoding": "snappy",
                                          "X-Prometheus-Remote-Write-Version": "0.1.0"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        if resp.status // 100 != 2:
            raise RuntimeError(f"remote write: HTTP {resp.status} {resp.read()[:500]!r}")
