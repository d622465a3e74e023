"""The local stack is the real thing: Karpenter provisions kwok GPU nodes for pending pods, the
CRDs' schema/CEL validation is enforced by the apiserver, and the controller-manager computes
PodDisruptionBudget status. Timings are printed, never asserted."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from conftest import KubectlError

GPU_TYPES = {"g5.xlarge", "g6.2xlarge", "g5.12xlarge", "g6e.12xlarge"}


def gpu_pod(name: str, gpus: int = 1) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "inference", "labels": {"app": "stack-smoke"}},
        "spec": {
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "true",
                             "effect": "NoSchedule"}],
            "containers": [{
                "name": "vllm",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": "1", "memory": "2Gi", "nvidia.com/gpu": str(gpus)},
                              "limits": {"nvidia.com/gpu": str(gpus)}},
            }],
        },
    }


def test_pending_gpu_pod_gets_a_karpenter_node_and_runs(k8s, wait_until):
    name = f"smoke-gpu-{uuid.uuid4().hex[:6]}"
    t0 = time.monotonic()
    k8s.apply(gpu_pod(name))
    node_name = None
    try:
        # Running and Ready: a pod bound in the seconds after its node turned Ready can be
        # marked NotReady by the node lifecycle controller's next pass (MarkPodsNotReady) and
        # Ready again a status sync later (manifests/kwok-pod-ready-again.yaml), so Ready is
        # waited for, not read at the instant Running is seen.
        pod = wait_until(lambda: (p := k8s.get("pod", name, "inference"))
                         and p["status"].get("phase") == "Running"
                         and any(c["type"] == "Ready" and c["status"] == "True"
                                 for c in p["status"].get("conditions", [])) and p,
                         timeout=300, what=f"pod {name} Running and Ready")
        t_running = time.monotonic() - t0
        node_name = pod["spec"]["nodeName"]
        node = k8s.get("node", node_name)
        claims = [nc for nc in k8s.get("nodeclaims.karpenter.sh")
                  if nc.get("status", {}).get("nodeName") == node_name]

        # A node Karpenter launched for this pod (created after it), from NodePool gpu.
        assert len(claims) == 1, f"no NodeClaim owns node {node_name}"
        assert claims[0]["metadata"]["labels"]["karpenter.sh/nodepool"] == "gpu"
        assert node["metadata"]["creationTimestamp"] >= pod["metadata"]["creationTimestamp"]
        labels = node["metadata"]["labels"]
        assert labels["node.kubernetes.io/instance-type"] in GPU_TYPES
        assert labels["karpenter.sh/nodepool"] == "gpu"
        assert k8s.node_ready(node)
        assert int(node["status"]["allocatable"]["nvidia.com/gpu"]) >= 1
        assert {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"} in [
            {k: t.get(k) for k in ("key", "value", "effect")} for t in node["spec"].get("taints", [])]
        ready = [c for c in pod["status"]["conditions"] if c["type"] == "Ready"]
        assert ready and ready[0]["status"] == "True"
        print(f"\nsmoke: pod Running {t_running:.1f}s after creation on a new "
              f"{labels['node.kubernetes.io/instance-type']} ({labels.get('karpenter.sh/capacity-type')}, "
              f"{labels.get('topology.kubernetes.io/zone')})")
    finally:
        k8s.delete("pod", name, "inference")
        if node_name:
            for nc in k8s.get("nodeclaims.karpenter.sh"):
                if nc.get("status", {}).get("nodeName") == node_name:
                    k8s.delete("nodeclaims.karpenter.sh", nc["metadata"]["name"])


def test_nodepool_crd_validation_is_enforced(k8s):
    bad = {"spec": {"disruption": {"consolidateAfter": "30s", "budgets": [{"nodes": "abc"}]}}}
    with pytest.raises(KubectlError) as err:
        k8s.run("patch", "nodepool", "gpu", "--type=merge", "-p", json.dumps(bad), "--dry-run=server")
    assert "budgets" in err.value.stderr and "nodes" in err.value.stderr, err.value.stderr

    # CEL (x-kubernetes-validations), not only the OpenAPI schema: schedule needs a duration.
    cel = {"spec": {"disruption": {"consolidateAfter": "30s",
                                   "budgets": [{"nodes": "1", "schedule": "0 9 * * *"}]}}}
    with pytest.raises(KubectlError) as err:
        k8s.run("patch", "nodepool", "gpu", "--type=merge", "-p", json.dumps(cel), "--dry-run=server")
    assert "schedule" in err.value.stderr and "duration" in err.value.stderr, err.value.stderr

    # The same patches with valid values pass: the rejections above were about the values.
    good = {"spec": {"disruption": {"consolidateAfter": "30s",
                                    "budgets": [{"nodes": "10%"},
                                                {"nodes": "0", "schedule": "0 9 * * *", "duration": "1h"}]}}}
    k8s.run("patch", "nodepool", "gpu", "--type=merge", "-p", json.dumps(good), "--dry-run=server")


def test_pdb_status_is_computed_by_the_controller_manager(k8s, wait_until):
    suffix = uuid.uuid4().hex[:6]
    app = f"smoke-pdb-{suffix}"
    # Pods stay Pending on purpose (no node has this label, so Karpenter cannot help either):
    # only the Deployment -> ReplicaSet -> Pod chain and the disruption controller are under test.
    k8s.apply({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": app, "namespace": "inference"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": app}},
            "template": {
                "metadata": {"labels": {"app": app}},
                "spec": {"nodeSelector": {"prewarm.io/smoke-test": "nowhere"},
                         "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
            },
        },
    })
    k8s.apply({
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": app, "namespace": "inference"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": app}}},
    })
    pods = wait_until(lambda: len(k8s.get("pods", namespace="inference", selector=f"app={app}")) == 2,
                      timeout=120, what="the Deployment's 2 pods")
    assert pods

    def pdb_status():
        pdb = k8s.get("pdb", app, "inference")
        status = pdb.get("status", {})
        if status.get("observedGeneration") == pdb["metadata"]["generation"] and \
                status.get("expectedPods") == 2:
            return status
        return None

    status = wait_until(pdb_status, timeout=120, what="PDB status from the disruption controller")
    assert status["currentHealthy"] == 0
    assert status["desiredHealthy"] == 1
    assert status["disruptionsAllowed"] == 0


def test_eventbridge_rules_route_interruption_events_to_the_queue(aws):
    detail = {"instance-id": "i-0123456789abcdef0", "instance-action": "terminate"}
    aws.events.put_events(Entries=[
        {"Source": "aws.ec2", "DetailType": "EC2 Spot Instance Interruption Warning",
         "Detail": json.dumps(detail), "Resources": ["arn:aws:ec2:us-east-1:123456789012:instance/i-0123456789abcdef0"]},
        # Matches no rule: must not reach the queue.
        {"Source": "aws.ec2", "DetailType": "EC2 AMI State Change", "Detail": "{}"},
    ])
    got = aws.sqs.receive_message(QueueUrl=aws.queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=2)
    bodies = [json.loads(m["Body"]) for m in got.get("Messages", [])]
    assert [b["detail-type"] for b in bodies] == ["EC2 Spot Instance Interruption Warning"]
    assert bodies[0]["detail"] == detail and bodies[0]["source"] == "aws.ec2"
    redrive = json.loads(aws.sqs.get_queue_attributes(
        QueueUrl=aws.queue_url, AttributeNames=["RedrivePolicy"])["Attributes"]["RedrivePolicy"])
    assert int(redrive["maxReceiveCount"]) == 3 and redrive["deadLetterTargetArn"].endswith("-dlq")
    assert aws.eks.describe_cluster(name="prewarm-test")["cluster"]["name"] == "prewarm-test"


def test_prometheus_scrapes_the_load_generator(loadgen, prometheus, wait_until):
    loadgen.capacity(model="smoke-model", replicas=1, concurrency=2, service_s=5)
    loadgen.scenario("constant", model="smoke-model", rps=10)
    # Demand (10/s) is far above capacity (2 in flight / 5 s): the queue must grow.
    waiting = wait_until(
        lambda: (v := prometheus.value('vllm:num_requests_waiting{model_name="smoke-model"}')) and v >= 20 and v,
        timeout=60, what="Prometheus to see a growing vLLM queue")
    assert waiting >= 20
    assert prometheus.value('vllm:num_requests_running{model_name="smoke-model"}') == 2


def test_localstack_serves_cloudwatch_metrics(aws, wait_until):
    import datetime as dt
    now = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    name = f"SmokeQueue{uuid.uuid4().hex[:6]}"
    aws.cloudwatch.put_metric_data(Namespace="PrewarmSmoke", MetricData=[
        {"MetricName": name, "Value": 7.0, "Timestamp": now, "Unit": "Count"}])

    def fetch():
        out = aws.cloudwatch.get_metric_data(
            MetricDataQueries=[{"Id": "q", "MetricStat": {
                "Metric": {"Namespace": "PrewarmSmoke", "MetricName": name}, "Period": 60, "Stat": "Maximum"}}],
            StartTime=now - dt.timedelta(minutes=5), EndTime=now + dt.timedelta(minutes=5))
        return out["MetricDataResults"][0]["Values"]

    assert wait_until(fetch, timeout=30, what="CloudWatch datapoint") == [7.0]


def test_the_lambda_runs_under_the_runtime_api_emulator_and_a_bad_setting_names_itself(lambda_watch):
    # The whole chain the scenario tests rely on: build, `cargo lambda watch`, the environment
    # reaching the function, an invocation, and a function that dies at start-up being reported
    # (instead of the emulator waiting forever) with the variable's name.
    watch = lambda_watch({"PREWARM_HANDLER": "no-such-handler"})
    with pytest.raises(RuntimeError) as err:
        watch.invoke({"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}}, timeout=600)
    # The value is echoed: proves the variable reached the function (unset reads differently).
    assert "PREWARM_HANDLER" in str(err.value) and "no-such-handler" in str(err.value), str(err.value)[-2000:]


def test_karpenter_provisions_for_a_capacity_buffer(k8s, wait_until):
    # The CapacityBuffer feature gate is on: a buffer of one replica-shaped chunk makes Karpenter
    # launch a node with no pod of ours on it. 6 CPUs / 24 GiB / 1 GPU fits no g5.xlarge.
    name = f"smoke-cb-{uuid.uuid4().hex[:6]}"
    before = {nc["metadata"]["name"] for nc in k8s.get("nodeclaims.karpenter.sh")}
    k8s.apply({
        "apiVersion": "v1", "kind": "PodTemplate",
        "metadata": {"name": name, "namespace": "prewarm"},
        "template": {"spec": {
            "nodeSelector": {"karpenter.sh/nodepool": "gpu"},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "shape", "image": "registry.k8s.io/pause:3.10", "resources": {
                "requests": {"cpu": "6", "memory": "24Gi", "nvidia.com/gpu": "1"},
                "limits": {"nvidia.com/gpu": "1"}}}]}},
    })
    k8s.apply({
        "apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
        "metadata": {"name": name, "namespace": "prewarm"},
        "spec": {"provisioningStrategy": "buffer.x-k8s.io/active-capacity",
                 "podTemplateRef": {"name": name}, "replicas": 1},
    })
    new: list[dict] = []
    try:
        # Wait for the launched claim: the instance-type label comes with the launch.
        new = wait_until(lambda: [nc for nc in k8s.get("nodeclaims.karpenter.sh")
                                  if nc["metadata"]["name"] not in before
                                  and "node.kubernetes.io/instance-type" in nc["metadata"].get("labels", {})],
                         timeout=180, what="a launched NodeClaim for the CapacityBuffer")
        assert len(new) == 1
        assert new[0]["metadata"]["labels"]["karpenter.sh/nodepool"] == "gpu"
        instance_type = new[0]["metadata"]["labels"]["node.kubernetes.io/instance-type"]
        assert instance_type in GPU_TYPES - {"g5.xlarge"}, instance_type
        buffer = wait_until(lambda: (b := k8s.get("capacitybuffers.autoscaling.x-k8s.io", name, "prewarm"))
                            and "replicas" in b.get("status", {}) and b,
                            timeout=60, what="the CapacityBuffer's status")
        assert buffer["status"]["replicas"] == 1
    finally:
        k8s.delete("capacitybuffers.autoscaling.x-k8s.io", name, "prewarm")
        for nc in new:
            k8s.delete("nodeclaims.karpenter.sh", nc["metadata"]["name"])


def test_karpenter_keeps_the_replicas_of_a_static_nodepool(k8s, wait_until):
    # The StaticCapacity feature gate is on: a NodePool with spec.replicas gets that many nodes
    # without any pod asking for them.
    name = f"smoke-static-{uuid.uuid4().hex[:6]}"
    k8s.apply({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "limits": {"nodes": "2"},
            "template": {"spec": {
                "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
                "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In",
                                  "values": ["g5.xlarge"]}],
                "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}],
                "expireAfter": "Never",
            }},
        },
    })
    try:
        # A NodeClaim is created first and labelled with its instance type only once the cloud
        # provider has launched it: wait for the launched claim, not just the object.
        def launched_claims():
            claims = k8s.get("nodeclaims.karpenter.sh", selector=f"karpenter.sh/nodepool={name}")
            launched = [c for c in claims
                        if "node.kubernetes.io/instance-type" in c["metadata"].get("labels", {})]
            return claims if claims and len(launched) == len(claims) else None

        claims = wait_until(launched_claims, timeout=180,
                            what=f"a launched NodeClaim for static NodePool {name}")
        assert len(claims) == 1
        assert claims[0]["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "g5.xlarge"
    finally:
        # Deleting the NodePool makes Karpenter remove its nodes (NodeClaims are owned by it).
        k8s.delete("nodepool", name)
