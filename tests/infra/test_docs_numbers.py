"""The docs state the queue and function settings the template deploys, and the two must not
drift: a reader sizing an outage from "5 × 30 s" must get the template's numbers. Each
statement of a timeout, a visibility timeout or the MaxReceiveCount default in the user docs is
read and compared with template.yaml (the one source)."""

import re
from pathlib import Path

import pytest

from infra_paths import REPO

# (what, pattern whose group 1 is the number as the docs state it, the template's value)
STATEMENTS = [
    ("visibility timeout", re.compile(r"visibility timeout(?: is)? (\d+) s|`VisibilityTimeout` \((\d+) s\)|(\d+) s visibility timeout", re.I), "visibility"),
    ("interruption function timeout", re.compile(r"interruption function's (\d+) s timeout|function timeout is (\d+) s", re.I), "interruption_timeout"),
    ("MaxReceiveCount default", re.compile(r"MaxReceiveCount` \(template default (\d+)\)|template default (\d+)\)|MaxReceiveCount=(\d+)"), "max_receive"),
    ("visibility timeouts in a row", re.compile(r"(\d+) × (\d+) s\)"), "receive_budget"),
]


def settings(template) -> dict:
    res = template["Resources"]
    queue = res["InterruptionQueue"]["Properties"]
    return {
        "visibility": int(queue["VisibilityTimeout"]),
        "interruption_timeout": int(res["InterruptionFunction"]["Properties"]["Timeout"]),
        "max_receive": int(template["Parameters"]["MaxReceiveCount"]["Default"]),
    }


def user_docs() -> list[Path]:
    docs = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    return [p for p in docs if "notebook" not in p.parts]


def stated(paths: list[Path]):
    """(doc:line, what, numbers stated) for every statement the patterns find."""
    for doc in paths:
        for n, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            for what, pattern, key in STATEMENTS:
                for m in pattern.finditer(line):
                    nums = [int(g) for g in m.groups() if g is not None]
                    yield f"{doc.name}:{n}", key, nums, line.strip()


def disagreements(paths, values) -> list[str]:
    out = []
    for where, key, nums, line in stated(paths):
        # A test scenario's own, scaled-down settings are stated as such and are not the template's.
        if "scaled down" in line or "maxReceiveCount 2" in line or "maxReceiveCount 3" in line:
            continue
        want = [values["max_receive"], values["visibility"]] if key == "receive_budget" else [values[key]]
        if nums != want:
            out.append(f"{where}: states {key} {nums}, template.yaml has {want}")
    return out


def test_the_docs_state_the_templates_queue_and_timeout_numbers(template):
    values = settings(template)
    found = list(stated(user_docs()))
    # The statements exist: a rewording that the patterns no longer see would make this vacuous.
    assert {k for _, k, _, _ in found} >= {"visibility", "interruption_timeout", "max_receive"}, found
    assert disagreements(user_docs(), values) == []


def test_a_stale_number_is_reported(tmp_path):
    doc = tmp_path / "x.md"
    doc.write_text("the function timeout is 20 s and the queue's visibility timeout 180 s.\n"
                   "`MaxReceiveCount` (template default 30) counts ...\n")
    values = {"visibility": 30, "interruption_timeout": 20, "max_receive": 5}
    got = disagreements([doc], values)
    assert "x.md:2: states max_receive [30], template.yaml has [5]" in got
    assert any("visibility" in g and "[180]" in g for g in got), got
