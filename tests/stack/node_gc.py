#!/usr/bin/env python3
"""Deletes kwok nodes whose "instance" is gone, as the cloud-controller-manager does on AWS.

On AWS, when Karpenter terminates an instance, the cloud node-lifecycle controller deletes the
Node object once EC2 reports the instance gone. Karpenter's kwok provider has no instance behind
a node, and its Delete removes only the NodeClaim: a NodeClaim deleted before its node
registered (Karpenter's termination path never drains such a node) leaves the Node behind forever.
This loop stands in for that controller: a node Karpenter launched (label karpenter.sh/nodepool,
annotation kwok.x-k8s.io/node=fake) that no NodeClaim references (status.providerID) for
GRACE_S seconds is deleted. Nodes created by hand or by tests without that label are left alone, and
so are nodes labelled prewarm-test: a test's stand-in for a pool node whose instance is alive (it
carries the pool label so that prewarm finds its pool, has no NodeClaim by construction, and its
test deletes it).
Env: KUBECONFIG, STACK_BIN (kubectl), NODE_GC_GRACE_S (default 20), NODE_GC_INTERVAL_S (5).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

GRACE_S = float(os.environ.get("NODE_GC_GRACE_S", "20"))
INTERVAL_S = float(os.environ.get("NODE_GC_INTERVAL_S", "5"))
KUBECTL = os.path.join(os.environ.get("STACK_BIN", ""), "kubectl") if os.environ.get("STACK_BIN") else "kubectl"


def kubectl_json(*args: str) -> list[dict]:
    out = subprocess.run([KUBECTL, *args, "-o", "json"], capture_output=True, text=True, check=True, timeout=30)
    return json.loads(out.stdout)["items"]


def main() -> None:
    orphan_since: dict[str, float] = {}
    while True:
        try:
            claimed = {nc.get("status", {}).get("providerID") for nc in kubectl_json("get", "nodeclaims.karpenter.sh")}
            nodes = kubectl_json("get", "nodes", "-l", "karpenter.sh/nodepool")
            now = time.monotonic()
            seen = set()
            for node in nodes:
                name = node["metadata"]["name"]
                if node["metadata"].get("annotations", {}).get("kwok.x-k8s.io/node") != "fake":
                    continue
                if "prewarm-test" in node["metadata"].get("labels", {}):
                    continue
                if node.get("spec", {}).get("providerID") in claimed:
                    continue
                seen.add(name)
                first = orphan_since.setdefault(name, now)
                if now - first >= GRACE_S:
                    print(f"deleting node {name}: no NodeClaim has referenced it for {GRACE_S:.0f}s", flush=True)
                    subprocess.run([KUBECTL, "delete", "node", name, "--ignore-not-found", "--wait=false"],
                                   check=False, timeout=30)
            orphan_since = {k: v for k, v in orphan_since.items() if k in seen}
        except (subprocess.SubprocessError, json.JSONDecodeError, KeyError) as e:
            print(f"node-gc: {e}", file=sys.stderr, flush=True)
        time.sleep(INTERVAL_S)


if __name__ == "__main__":
    main()
