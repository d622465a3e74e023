"""Checks of template.yaml that linters do not make: least privilege, configuration completeness,
event wiring. The template is read with cfn-lint's decoder (it understands !Ref, !Sub, !If ...),
so intrinsic functions appear as {"Ref": ...}, {"Fn::GetAtt": [...]}, {"Fn::If": [...]}.
"""

import copy
import json
import re
import subprocess
import sys
import tomllib

import pytest
import yaml
from cfnlint.decode import decode_str

from infra_paths import REPO

TEMPLATE = REPO / "template.yaml"


def resources_of(tpl: dict, *types: str) -> dict:
    return {k: v for k, v in tpl["Resources"].items() if v["Type"] in types}


# ------------------------------------------------------------------ IAM: no wildcard actions

SERVICE_WIDE = re.compile(r"^[A-Za-z0-9-]+:\*$")


def branches(node):
    """Every concrete value a node may take: both sides of each Fn::If."""
    if isinstance(node, dict) and set(node) == {"Fn::If"}:
        _, yes, no = node["Fn::If"]
        yield from branches(yes)
        yield from branches(no)
    elif isinstance(node, dict) and set(node) == {"Ref"} and node["Ref"] == "AWS::NoValue":
        return
    else:
        yield node


def statements_of(document) -> list[tuple[str, dict]]:
    out = []
    for doc in branches(document):
        if not isinstance(doc, dict):
            continue
        stmts = doc.get("Statement", [])
        for stmt_node in branches(stmts):
            for s in stmt_node if isinstance(stmt_node, list) else [stmt_node]:
                for concrete in branches(s):
                    out.append(concrete)
    return out


def policy_documents(tpl: dict):
    """(where, document) for every IAM policy document in the template: roles (trust and inline),
    IAM policies, queue / topic / bucket policies, and SAM function inline Policies."""
    for name, res in tpl["Resources"].items():
        props = res.get("Properties", {}) or {}
        t = res["Type"]
        if t == "AWS::IAM::Role":
            yield f"{name}.AssumeRolePolicyDocument", props.get("AssumeRolePolicyDocument")
            for p in props.get("Policies", []) or []:
                for pb in branches(p):
                    yield f"{name}.Policies.{pb.get('PolicyName')}", pb.get("PolicyDocument")
        elif t in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy", "AWS::SQS::QueuePolicy",
                   "AWS::SQS::QueueInlinePolicy", "AWS::SNS::TopicPolicy", "AWS::S3::BucketPolicy",
                   "AWS::KMS::Key"):
            yield f"{name}.PolicyDocument", props.get("PolicyDocument") or props.get("KeyPolicy")
        elif t == "AWS::Serverless::Function":
            policies = props.get("Policies", [])
            for p in policies if isinstance(policies, list) else [policies]:
                for pb in branches(p):
                    if isinstance(pb, dict) and "Statement" in pb:
                        yield f"{name}.Policies", pb


def wildcard_actions(tpl: dict) -> list[str]:
    found = []
    for where, doc in policy_documents(tpl):
        for s in statements_of(doc):
            if "NotAction" in s:
                found.append(f"{where}: NotAction grants everything else")
            actions = s.get("Action", [])
            for a in actions if isinstance(actions, list) else [actions]:
                if isinstance(a, str) and (a == "*" or SERVICE_WIDE.match(a)):
                    found.append(f"{where}: Action {a!r}")
    return found


def test_no_iam_statement_has_a_wildcard_action(template):
    assert wildcard_actions(template) == []


def test_the_scan_sees_policy_documents(template):
    """Guard against a scanner that silently looks at nothing."""
    wheres = [w for w, _ in policy_documents(template)]
    assert any("TickRole.Policies" in w for w in wheres)
    assert any("InterruptionRole.Policies" in w for w in wheres)
    assert any("InterruptionQueuePolicy" in w for w in wheres)
    n = sum(len(statements_of(d)) for _, d in policy_documents(template))
    assert n >= 13


def _bad_role(tpl, action):
    tpl["Resources"]["TickRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"].append(
        {"Effect": "Allow", "Action": action, "Resource": "*"})


def _bad_conditional(tpl, action):
    tpl["Resources"]["InterruptionRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"].append(
        {"Fn::If": ["IsAmp", {"Effect": "Allow", "Action": [action], "Resource": "*"}, {"Ref": "AWS::NoValue"}]})


def _bad_queue_policy(tpl, action):
    tpl["Resources"]["InterruptionQueuePolicy"]["Properties"]["PolicyDocument"]["Statement"][0]["Action"] = action


def _bad_sam_inline(tpl, action):
    tpl["Resources"]["TickFunction"]["Properties"]["Policies"] = [
        {"Statement": [{"Effect": "Allow", "Action": ["logs:PutLogEvents", action], "Resource": "*"}]}]


def _bad_extra_policy(tpl, action):
    tpl["Resources"]["Extra"] = {"Type": "AWS::IAM::Policy", "Properties": {
        "PolicyName": "x", "Roles": [{"Ref": "TickRole"}],
        "PolicyDocument": {"Version": "2012-10-17", "Statement": {"Effect": "Allow", "Action": action, "Resource": "*"}}}}


@pytest.mark.parametrize("mutate", [_bad_role, _bad_conditional, _bad_queue_policy, _bad_sam_inline, _bad_extra_policy])
@pytest.mark.parametrize("action", ["*", "sqs:*", "eks:*"])
def test_a_wildcard_action_is_caught(template, mutate, action):
    bad = copy.deepcopy(template)
    mutate(bad, action)
    assert wildcard_actions(bad), f"{mutate.__name__} with {action!r} was not caught"


def test_a_wildcard_in_template_text_is_caught():
    """The same end to end from YAML text, through the decoder."""
    text = TEMPLATE.read_text().replace("Action: eks:DescribeCluster", 'Action: "*"', 1)
    assert text != TEMPLATE.read_text()
    bad, matches = decode_str(text)
    assert not matches
    assert any("Action '*'" in f for f in wildcard_actions(bad))


# ------------------------------------------------------------------ configuration

# Every setting the functions read (src/config; the conventions' list), except KUBECONFIG, which
# is for local runs (in Lambda the cluster comes from CLUSTER_NAME through eks:DescribeCluster).
# Each function gets the shared settings and its own (the interruption function no metric setting).
SHARED_SETTINGS = ["CLUSTER_NAME", "PREWARM_TARGETS", "PREWARM_TARGETS_CONFIGMAP", "EMF_NAMESPACE"]
FUNCTION_SETTINGS = {
    "TickFunction": SHARED_SETTINGS + [
        "METRIC_SOURCE", "PROMETHEUS_URL", "AMP_WORKSPACE_URL", "CLOUDWATCH_NAMESPACE",
        "CLOUDWATCH_PUBLISH_SECONDS",
        "TICK_SECONDS", "LEAD_TIME_SECONDS", "METRICS_WINDOW_SECONDS",
        "METRICS_STEP_SECONDS", "ERROR_QUANTILE", "TARGET_WAIT_SECONDS", "SCALE_DOWN_DELAY_SECONDS",
        "COOLDOWN_SECONDS", "STALE_AFTER_SECONDS", "TARGET_TIMEOUT_SECONDS", "DRY_RUN", "PAUSED",
        "RATE_WINDOW_SECONDS", "SCRAPE_INTERVAL_SECONDS", "INGESTION_LAG_SECONDS",
        "SEASONS_SECONDS", "TIME_ZONE", "FAST_PATH_RATIO", "FAST_PATH_WINDOW_SECONDS",
        "BAND_HISTORY_SECONDS", "BAND_STEP_SECONDS", "BAND_BY_HOUR", "FORECASTER",
        "CALIBRATE_EVERY_SECONDS",
        "DELAYED_REQUEST_COST", "GPU_HOUR_COST",
        # reservation collection: when a silent drain is orphaned (the interruption's recheck)
        "RECHECK_SECONDS"],
    "InterruptionFunction": SHARED_SETTINGS + ["ACTIONS", "EVICTION_BUDGET_SECONDS", "RECHECK_SECONDS",
                                               "DRAIN_SURGE", "DELETE_PAST_PDB_AT_DEADLINE",
                                               "BALLOON_PRIORITY_CLASS", "PAUSE_IMAGE"],
}
SETTINGS = sorted({s for v in FUNCTION_SETTINGS.values() for s in v})


def function_env(tpl: dict, name: str) -> dict:
    env = dict(tpl.get("Globals", {}).get("Function", {}).get("Environment", {}).get("Variables", {}))
    env.update(tpl["Resources"][name]["Properties"].get("Environment", {}).get("Variables", {}))
    return env


def refs_in(node) -> set[str]:
    """Names referenced by Ref, GetAtt or ${...} inside Sub."""
    out: set[str] = set()
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "Ref":
                out.add(v)
            elif k == "Fn::GetAtt":
                out.add(v[0] if isinstance(v, list) else v.split(".")[0])
            elif k == "Fn::Sub":
                s = v if isinstance(v, str) else v[0]
                out.update(x.split(".")[0] for x in re.findall(r"\$\{([^}!]+)\}", s))
                if not isinstance(v, str):
                    out.update(refs_in(v[1]))
            else:
                out.update(refs_in(v))
    elif isinstance(node, list):
        for v in node:
            out.update(refs_in(v))
    return out


def test_every_function_setting_is_a_parameter(template):
    params = set(template["Parameters"])
    resources = set(template["Resources"])
    for fn in resources_of(template, "AWS::Serverless::Function"):
        env = function_env(template, fn)
        missing = [s for s in FUNCTION_SETTINGS[fn] if s not in env]
        assert not missing, f"{fn} lacks {missing}"
        extra = [s for s in env if s in SETTINGS and s not in FUNCTION_SETTINGS[fn]]
        assert not extra, f"{fn} gets settings it does not read: {extra}"
        for var, value in env.items():
            if var == "PREWARM_HANDLER":
                assert value in ("tick", "interruption")
                continue
            if var == "INTERRUPTION_QUEUE_URL":
                assert value == {"Ref": "InterruptionQueue"}
                continue
            assert var in SETTINGS, f"{fn}: {var} is not a setting the binary reads"
            names = {n for n in refs_in(value) if not n.startswith("AWS::")}
            assert names and names <= params, f"{fn}: {var} = {value} must come from a Parameter"
            assert not (names & resources)


def test_handlers_are_selected_per_function(template):
    assert function_env(template, "TickFunction")["PREWARM_HANDLER"] == "tick"
    assert function_env(template, "InterruptionFunction")["PREWARM_HANDLER"] == "interruption"


def test_settings_are_read_by_the_binary(repo):
    """When the crate's config module is present, each setting here must be read there: a rename
    on one side fails this test instead of silently using a default in production."""
    config = repo / "src" / "config"
    files = list(config.rglob("*.rs")) if config.is_dir() else []
    if not files:
        pytest.skip("src/config not in this checkout yet")
    text = "\n".join(f.read_text() for f in files)
    unread = [s for s in SETTINGS if f'"{s}"' not in text]
    assert not unread, f"template sets {unread}, src/config never reads them"


# ------------------------------------------------------------------ functions and events

def test_functions_are_built_from_the_one_rust_binary(template):
    glob = template["Globals"]["Function"]
    assert (glob["Runtime"], glob["Handler"], glob["CodeUri"]) == ("provided.al2023", "bootstrap", ".")
    assert glob["Tracing"] == "Active"
    arch = template["Parameters"]["Architecture"]
    assert arch["Default"] == "arm64" and set(arch["AllowedValues"]) == {"arm64", "x86_64"}
    for name, fn in resources_of(template, "AWS::Serverless::Function").items():
        assert fn["Metadata"]["BuildMethod"] == "rust-cargolambda"
        assert fn["Metadata"]["BuildProperties"]["Binary"] == "prewarm"
        assert fn["Properties"]["LoggingConfig"]["LogFormat"] == "JSON"
        group = template["Resources"][fn["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]]
        assert "RetentionInDays" in group["Properties"]


def test_tick_runs_every_minute(template):
    """(Reserved concurrency 1 is optional: tests/infra/test_deploy.py.)"""
    props = template["Resources"]["TickFunction"]["Properties"]
    (event,) = props["Events"].values()
    assert event["Type"] == "Schedule" and event["Properties"]["Schedule"] == "rate(1 minute)"
    # Loops ticks within the minute: longer than a minute, far from Lambda's 15-minute maximum.
    assert 60 <= props["Timeout"] <= 90


def test_interruption_reads_the_queue_in_batches_with_partial_failures(template):
    props = template["Resources"]["InterruptionFunction"]["Properties"]
    (event,) = props["Events"].values()
    assert event["Type"] == "SQS"
    ep = event["Properties"]
    assert ep["Queue"] == {"Fn::GetAtt": ["InterruptionQueue", "Arn"]}
    assert ep["BatchSize"] == 10
    assert ep["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert "MaximumBatchingWindowInSeconds" in ep
    queue = template["Resources"]["InterruptionQueue"]["Properties"]
    # Lambda requires the visibility timeout to be at least the function timeout, and a crashed
    # or throttled batch must come back well inside a spot warning's 120 s (issue 11, item 10).
    assert props["Timeout"] <= queue["VisibilityTimeout"] <= 60


def test_queue_has_a_redrive_policy_to_a_dead_letter_queue(template):
    queue = template["Resources"]["InterruptionQueue"]["Properties"]
    assert queue["SqsManagedSseEnabled"] is True
    redrive = queue["RedrivePolicy"]
    target = redrive["deadLetterTargetArn"]["Fn::GetAtt"][0]
    assert template["Resources"][target]["Type"] == "AWS::SQS::Queue"
    assert target != "InterruptionQueue"
    assert "maxReceiveCount" in redrive


INTERRUPTION_KINDS = {
    ("aws.ec2", "EC2 Spot Instance Interruption Warning"),
    ("aws.ec2", "EC2 Instance Rebalance Recommendation"),
    ("aws.ec2", "EC2 Instance State-change Notification"),
    ("aws.health", "AWS Health Event"),
    ("aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning"),
    # Both spellings of AWS's documentation (EC2 User Guide, capacity-blocks-monitor).
    ("aws.ec2", "Capacity Block Expiration Warning"),
    ("aws.ec2", "Capacity Block Reservation Expiration Warning"),
}


def test_every_rule_targets_the_queue_and_may_send_to_it(template):
    rules = resources_of(template, "AWS::Events::Rule")
    policy = template["Resources"]["InterruptionQueuePolicy"]["Properties"]
    assert policy["Queues"] == [{"Ref": "InterruptionQueue"}]
    allowed = set()
    for s in policy["PolicyDocument"]["Statement"]:
        assert s["Principal"] == {"Service": "events.amazonaws.com"}
        assert s["Action"] == "sqs:SendMessage"
        allowed.update(a["Fn::GetAtt"][0] for a in s["Condition"]["ArnEquals"]["aws:SourceArn"])
    kinds = set()
    for name, rule in rules.items():
        props = rule["Properties"]
        assert props["State"] == "ENABLED"
        targets = props["Targets"]
        assert [t["Arn"] for t in targets] == [{"Fn::GetAtt": ["InterruptionQueue", "Arn"]}], name
        assert name in allowed, f"{name} is not allowed to send by the queue policy"
        pattern = props["EventPattern"]
        for src in pattern["source"]:
            for dt in pattern["detail-type"]:
                kinds.add((src, dt))
    assert kinds == INTERRUPTION_KINDS
    assert allowed == set(rules), "queue policy allows a rule that does not exist"


def test_alarms_cover_dlq_errors_and_a_silent_tick(template):
    alarms = resources_of(template, "AWS::CloudWatch::Alarm")
    by_metric = {(str(a["Properties"]["Namespace"]), a["Properties"]["MetricName"]): a["Properties"]
                 for a in alarms.values() if "Namespace" in a["Properties"]}
    dlq = by_metric[("AWS/SQS", "ApproximateNumberOfMessagesVisible")]
    assert dlq["Dimensions"][0]["Value"] == {"Fn::GetAtt": ["InterruptionDeadLetterQueue", "QueueName"]}
    assert (dlq["ComparisonOperator"], dlq["Threshold"]) == ("GreaterThanThreshold", 0)
    silent = by_metric[("AWS/Lambda", "Invocations")]
    assert silent["ComparisonOperator"] == "LessThanThreshold" and silent["Threshold"] == 1
    # Kept on purpose (the template says why): Lambda publishes no zero for a tick that did not
    # run, so missing data is the one thing this alarm can see.
    assert silent["TreatMissingData"] == "breaching"
    errors = [a for a in alarms.values() if a["Properties"].get("MetricName") == "Errors"
              and a["Properties"].get("Namespace") == "AWS/Lambda"]
    assert {a["Properties"]["Dimensions"][0]["Value"]["Ref"] for a in errors} == {"TickFunction", "InterruptionFunction"}


def test_query_definitions(template):
    queries = resources_of(template, "AWS::Logs::QueryDefinition")
    assert len(queries) >= 4
    text = "\n".join(q["Properties"]["QueryString"] for q in queries.values())
    for needle in ('event = "decision"', 'event = "interruption"', 'event = "drain_blocked"', 'level = "ERROR"', "pod"):
        assert needle in text


def test_access_entries_map_roles_to_the_rbac_group(template, repo):
    """Each function's role maps to its own group, which the chart's RBAC (infra/k8s/rbac.yaml is
    its render) binds to that function's roles only."""
    rbac = [d for d in yaml.safe_load_all((repo / "infra/k8s/rbac.yaml").read_text()) if d]
    bound = {}
    for b in rbac:
        if b["kind"] in ("ClusterRoleBinding", "RoleBinding"):
            for s in b["subjects"]:
                bound.setdefault(s["name"], set()).add(b["roleRef"]["name"])
    entries = resources_of(template, "AWS::EKS::AccessEntry")
    principals = set()
    for e in entries.values():
        props = e["Properties"]
        assert props["Type"] == "STANDARD"
        assert "AccessPolicies" not in props, "RBAC is the whole grant: no EKS access policy"
        (group_ref,) = props["KubernetesGroups"]
        # A parameter whose default is the chart's group (tests/infra/test_chart.py).
        group = template["Parameters"][group_ref["Ref"]]["Default"]
        role = props["PrincipalArn"]["Fn::GetAtt"][0]
        fn = {"TickRole": "tick", "InterruptionRole": "interruption"}[role]
        assert bound[group] == {f"prewarm-{fn}"}, (group, bound.get(group))
        principals.add(role)
    roles = {fn["Properties"]["Role"]["Fn::GetAtt"][0] for fn in resources_of(template, "AWS::Serverless::Function").values()}
    assert principals == roles


def test_scoped_permissions(template):
    """The narrow resources the issue asks for."""
    def stmt(role, sid):
        for s in statements_of(template["Resources"][role]["Properties"]["Policies"][0]["PolicyDocument"]):
            if s.get("Sid") == sid:
                return s
        raise AssertionError(f"{role} has no statement {sid}")

    for role in ("TickRole", "InterruptionRole"):
        eks = stmt(role, "ClusterEndpoint")
        assert eks["Action"] == "eks:DescribeCluster"
        assert ":cluster/${ClusterName}" in eks["Resource"]["Fn::Sub"]
    aps = stmt("TickRole", "QueryWorkspace")
    assert aps["Action"] == "aps:QueryMetrics" and ":workspace/${AmpWorkspaceId}" in aps["Resource"]["Fn::Sub"]
    sqs = stmt("InterruptionRole", "ConsumeInterruptionQueue")
    assert "sqs:ChangeMessageVisibility" in sqs["Action"]
    # A claimed drain continues with a message of its own (delayed to its next check).
    assert "sqs:SendMessage" in sqs["Action"]
    assert sqs["Resource"] == {"Fn::GetAtt": ["InterruptionQueue", "Arn"]}


def test_the_tick_may_only_send_to_the_interruption_queue(template):
    """The tick hands orphaned and expired drains over as resume-drain messages: it gets the
    queue's URL and sqs:SendMessage on that queue alone, nothing else of SQS."""
    env = function_env(template, "TickFunction")
    assert env["INTERRUPTION_QUEUE_URL"] == {"Ref": "InterruptionQueue"}
    sqs = [s for s in statements_of(template["Resources"]["TickRole"]["Properties"]["Policies"][0]["PolicyDocument"])
           if any(str(a).startswith("sqs:") for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"]))]
    assert len(sqs) == 1, sqs
    assert sqs[0]["Action"] == "sqs:SendMessage"
    assert sqs[0]["Resource"] == {"Fn::GetAtt": ["InterruptionQueue", "Arn"]}


# ------------------------------------------------------------------ default targets vs the crate

def _rust_struct_fields(text: str, struct: str) -> tuple[set[str], set[str]]:
    """(all fields, fields without #[serde(default)]) of a `pub struct` with camelCase serde
    names. Enough of a reader for the plain structs of src/core/spec/."""
    start = text.index(f"pub struct {struct} {{")
    body = text[start:text.index("\n}", start)]
    fields, required = set(), set()
    has_default = False
    for line in body.splitlines()[1:]:
        line = line.strip()
        if line.startswith("#[serde(default"):
            has_default = True
        m = re.match(r"pub (\w+):", line)
        if m:
            parts = m.group(1).split("_")
            name = parts[0] + "".join(p.title() for p in parts[1:])
            fields.add(name)
            if not has_default and not line.split(":", 1)[1].strip().startswith("Option<"):
                required.add(name)
            has_default = False
    return fields, required


def test_default_targets_parse_as_the_crate_expects(template, repo):
    """TargetSpec denies unknown fields: a default the binary refuses would stop the tick."""
    text = (repo / "src" / "core" / "spec" / "target.rs").read_text()
    fields, required = _rust_struct_fields(text, "TargetSpec")
    assert {"name", "nodePool", "headroom", "maxSpare"} <= fields, fields
    # The example targets are the chart's (the template reads them from its ConfigMap).
    values = yaml.safe_load((repo / "infra/helm/prewarm/values-examples.yaml").read_text())
    targets = [{k: v for k, v in t.items() if k != "chart"} for t in values["targets"]]
    assert template["Parameters"]["TargetsConfigMap"]["Default"] == "prewarm/prewarm-targets"
    assert targets
    for t in targets:
        assert set(t) <= fields, f"unknown target fields {set(t) - fields}"
        assert required <= set(t), f"missing required target fields {required - set(t)}"
        assert t["headroom"]["kind"] in ("balloon", "capacityBuffer", "nodePoolReplicas")
        assert t["server"] in ("vllm", "triton", "tgi", "sglang", "triton-trtllm", "trtllm-serve",
                               "dynamo", "llm-d")


def test_reader_of_rust_fields_sees_unknown_fields():
    fields, required = _rust_struct_fields(
        "pub struct T {\n    pub node_pool: String,\n    #[serde(default)]\n    pub min_spare: u32,\n}\n", "T")
    assert fields == {"nodePool", "minSpare"} and required == {"nodePool"}


# ------------------------------------------------------------------ dashboard

EMF_METRICS = {
    "Target": ["Forecast", "Observed", "Headroom", "Desired", "Actions", "Errors", "UnforecastableShare"],
    "Kind": ["NoticesReceived", "NoticeToCordonMs", "NoticeToReplacementReadyMs", "DrainsBeforeDeadline",
             "PodsMoved", "ServingGapReplicaSeconds", "BlockedPods", "Errors"],
}


def test_dashboard_is_valid_json_and_shows_every_emf_metric(template):
    body = template["Resources"]["Dashboard"]["Properties"]["DashboardBody"]["Fn::Sub"]
    # What CloudFormation substitutes: parameters, pseudo parameters, resource names/attributes.
    rendered = re.sub(r"\$\{([^}!]+)\}", lambda m: "x-" + m.group(1).replace(".", "-").replace(":", "-"), body)
    dash = json.loads(rendered)
    expressions = [m[0]["expression"] for w in dash["widgets"] for m in w["properties"]["metrics"]
                   if isinstance(m[0], dict)]
    for dim, names in EMF_METRICS.items():
        for name in names:
            assert any(f"{{\"x-EmfNamespace\",{dim}}} MetricName=\"{name}\"" in e for e in expressions), (dim, name)
    # The names in the template's contract comment are the ones on the dashboard.
    text = TEMPLATE.read_text()
    for names in EMF_METRICS.values():
        for name in names:
            assert re.search(rf"^#\s+{name}\s", text, re.M), f"{name} missing from the contract comment"


# ------------------------------------------------------------------ publishing (Serverless Application Repository)

SAR_KEYS = {"Name", "Description", "Author", "SpdxLicenseId", "LicenseUrl", "ReadmeUrl", "Labels",
            "SemanticVersion"}
# Optional in the repository's metadata: the release writes them from SOURCE_URL, the repository
# it is published from. The template names none rather than a made-up address.
RELEASE_URL_KEYS = {"HomePageUrl", "SourceCodeUrl"}


def test_the_license_file_is_the_one_cargo_declares(repo):
    cargo = tomllib.loads((repo / "Cargo.toml").read_text())["package"]
    assert cargo["license"] == "Apache-2.0"
    text = (repo / "LICENSE").read_text()
    # The full text, not a pointer to it: its title, its last section and the appendix.
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "9. Accepting Warranty or Additional Liability." in text
    assert "END OF TERMS AND CONDITIONS" in text


def test_serverless_repo_metadata_is_complete_and_agrees_with_the_crate(template, repo):
    app = template["Metadata"]["AWS::ServerlessRepo::Application"]
    assert SAR_KEYS <= set(app), f"missing {sorted(SAR_KEYS - set(app))}"
    cargo = tomllib.loads((repo / "Cargo.toml").read_text())["package"]
    assert app["SpdxLicenseId"] == cargo["license"]
    assert app["SemanticVersion"] == cargo["version"]
    chart = yaml.safe_load((repo / "infra/helm/prewarm/Chart.yaml").read_text())
    assert app["SemanticVersion"] == chart["appVersion"], "the chart's appVersion is the release"
    # `sam package` uploads these two local files with the application.
    for key in ("LicenseUrl", "ReadmeUrl"):
        assert (repo / app[key]).is_file(), key
    assert not RELEASE_URL_KEYS & set(app), "a URL in template.yaml: `make release SOURCE_URL=` writes them"
    # The repository's own limits: a name of 1-140 letters, digits and dashes, a description of
    # at most 256 characters, at most 10 labels of 1-127 characters each.
    assert re.fullmatch(r"[A-Za-z0-9-]{1,140}", app["Name"])
    assert 0 < len(app["Description"]) <= 256
    assert 0 < len(app["Labels"]) <= 10
    assert all(re.fullmatch(r"[A-Za-z0-9+\-_:/@]{1,127}", label) for label in app["Labels"])


# ------------------------------------------------------------------ partitions

# The CloudWatch console of each partition (the host a browser opens) and the URL suffix
# CloudFormation gives there (AWS::URLSuffix is amazonaws.com in GovCloud: not the console's).
PARTITIONS = {
    "aws": ("us-east-1", "amazonaws.com", "https://console.aws.amazon.com/cloudwatch/home?region=us-east-1"),
    "aws-cn": ("cn-north-1", "amazonaws.com.cn", "https://console.amazonaws.cn/cloudwatch/home?region=cn-north-1"),
    "aws-us-gov": ("us-gov-west-1", "amazonaws.com",
                   "https://console.amazonaws-us-gov.com/cloudwatch/home?region=us-gov-west-1"),
}


def resolve(node, tpl: dict, pseudo: dict, refs: dict):
    """Value of Sub / FindInMap / Ref / Join with the pseudo parameters and resource refs given."""
    if isinstance(node, str):
        return node
    if isinstance(node, list):
        return [resolve(n, tpl, pseudo, refs) for n in node]
    ((fn, arg),) = node.items()
    if fn == "Ref":
        return pseudo.get(arg, refs.get(arg))
    if fn == "Fn::FindInMap":
        m, k1, k2 = (resolve(a, tpl, pseudo, refs) for a in arg)
        return tpl["Mappings"][m][k1][k2]
    if fn == "Fn::Join":
        sep, parts = arg
        return sep.join(resolve(parts, tpl, pseudo, refs))
    if fn == "Fn::Sub":
        text, local = (arg, {}) if isinstance(arg, str) else (arg[0], arg[1])
        env = pseudo | refs | {k: resolve(v, tpl, pseudo, refs) for k, v in local.items()}
        return re.sub(r"\$\{([^}!]+)\}", lambda m: env[m.group(1)], text)
    raise AssertionError(f"{fn} not resolved by this test")


@pytest.mark.parametrize("partition", sorted(PARTITIONS))
def test_the_dashboard_url_opens_the_console_of_the_stacks_partition(template, partition):
    region, suffix, console = PARTITIONS[partition]
    pseudo = {"AWS::Partition": partition, "AWS::Region": region, "AWS::URLSuffix": suffix}
    url = resolve(template["Outputs"]["DashboardUrl"]["Value"], template, pseudo, {"Dashboard": "prewarm-x"})
    assert url == f"{console}#dashboards:name=prewarm-x"


def test_vpc_mode_gets_only_the_network_interface_policy(template):
    """In VPC mode the functions need to manage their ENIs, nothing more: the VPC execution role
    policy would also give logs:CreateLogGroup / PutLogEvents on every log group of the account,
    where each function may write only its own group (OwnLogGroup)."""
    for role in ("TickRole", "InterruptionRole"):
        arns = template["Resources"][role]["Properties"]["ManagedPolicyArns"]
        assert arns["Fn::If"][0] == "HasVpc" and arns["Fn::If"][2] == {"Ref": "AWS::NoValue"}
        (arn,) = arns["Fn::If"][1]
        assert arn == {"Fn::Sub": "arn:${AWS::Partition}:iam::aws:policy/service-role/AWSLambdaENIManagementAccess"}
    assert "AWSLambdaVPCAccessExecutionRole" not in re.sub(r"#.*", "", TEMPLATE.read_text())


def test_dashboard_search_expressions_quote_the_namespace(template):
    """EmfNamespace may hold '/', '.', ':' or '#' (its AllowedPattern): unquoted, SEARCH reads
    them as operators and the widget stays empty."""
    body = template["Resources"]["Dashboard"]["Properties"]["DashboardBody"]["Fn::Sub"]
    searches = re.findall(r"SEARCH\('\{(.*?),\w+\}", body)
    assert len(searches) >= 12
    assert set(searches) == {'\\"${EmfNamespace}\\"'}, set(searches)



# ------------------------------------------------------------------ alarms an on-call engineer needs

def alarms_of(tpl) -> dict:
    return {n: a["Properties"] for n, a in resources_of(tpl, "AWS::CloudWatch::Alarm").items()}


def notice_kinds(repo) -> list[str]:
    """The Kind dimension values the interruption path publishes (NoticeKind::as_str)."""
    text = (repo / "src/core/interruption/notice.rs").read_text()
    body = text[text.index("pub fn as_str(self)"):]
    body = body[:body.index("\n    }\n")]
    kinds = re.findall(r'=> "([a-z-]+)"', body)
    assert "spot-interruption" in kinds and len(kinds) >= 5, kinds
    return kinds


def test_every_alarm_that_pages_also_resolves(template):
    """A pager that is never told OK stays open: each alarm with AlarmActions has the same
    OKActions."""
    alarms = alarms_of(template)
    assert len(alarms) >= 8
    for name, a in alarms.items():
        assert "AlarmActions" in a, name
        assert a.get("OKActions") == a["AlarmActions"], name


def kind_metric_alarm(alarm, metric, stat):
    """(expression, {kind: metric stat}) of a metric-math alarm over one EMF metric per Kind."""
    queries = alarm["Metrics"]
    stats = {q["Id"]: q["MetricStat"] for q in queries if "MetricStat" in q}
    (expr,) = [q for q in queries if q.get("ReturnData", True) and "Expression" in q]
    kinds = {}
    for qid, ms in stats.items():
        m = ms["Metric"]
        assert m["Namespace"] == {"Ref": "EmfNamespace"} and m["MetricName"] == metric, qid
        assert ms["Stat"] == stat, qid
        ((dim,),) = [m["Dimensions"]]
        assert dim["Name"] == "Kind"
        kinds[dim["Value"]] = qid
    assert all(q.get("ReturnData") is False for q in queries if q is not expr)
    return expr["Expression"], kinds


def test_an_alarm_fires_on_a_drain_that_missed_its_deadline(template, repo):
    """DrainsBeforeDeadline is 1 for a drain finished in time and 0 for one that was not, per Kind:
    the smallest value of any kind below 1 is a miss. Every kind the binary publishes is watched."""
    (a,) = [a for a in alarms_of(template).values()
            if "DrainsBeforeDeadline" in json.dumps(a.get("Metrics", []))]
    expr, kinds = kind_metric_alarm(a, "DrainsBeforeDeadline", "Minimum")
    assert sorted(kinds) == sorted(notice_kinds(repo))
    assert expr.replace(" ", "") == "MIN([" + ",".join(sorted(kinds.values())) + "])"
    assert (a["ComparisonOperator"], a["Threshold"]) == ("LessThanThreshold", 1)
    # No drain finished: nothing to say.
    assert a["TreatMissingData"] == "notBreaching"


def test_an_alarm_fires_on_pods_blocking_drains(template, repo):
    (a,) = [a for a in alarms_of(template).values() if "BlockedPods" in json.dumps(a.get("Metrics", []))]
    expr, kinds = kind_metric_alarm(a, "BlockedPods", "Maximum")
    assert sorted(kinds) == sorted(notice_kinds(repo))
    assert expr.replace(" ", "") == "MAX([" + ",".join(sorted(kinds.values())) + "])"
    assert (a["ComparisonOperator"], a["Threshold"]) == ("GreaterThanThreshold", 0)
    # A PDB holding an eviction for a moment is the drain working; only a lasting block pages.
    assert a["EvaluationPeriods"] >= 3 and a["DatapointsToAlarm"] == a["EvaluationPeriods"]
    assert a["TreatMissingData"] == "notBreaching"


def test_an_alarm_fires_when_nothing_consumes_the_interruption_queue(template):
    """A disabled (or deleted, or throttled) event source mapping leaves notices in the queue: the
    age of the oldest message grows. A working queue holds nothing older than one delayed
    continuation (DelaySeconds at most 900) plus a check."""
    (a,) = [a for a in alarms_of(template).values() if a.get("MetricName") == "ApproximateAgeOfOldestMessage"]
    assert a["Namespace"] == "AWS/SQS"
    assert a["Dimensions"] == [{"Name": "QueueName", "Value": {"Fn::GetAtt": ["InterruptionQueue", "QueueName"]}}]
    assert a["Statistic"] == "Maximum" and a["ComparisonOperator"] == "GreaterThanThreshold"
    assert 900 < a["Threshold"] <= 1800
    assert a["TreatMissingData"] == "notBreaching"


def test_the_dashboard_shows_missed_drains_as_a_count(template, repo):
    """A 0/1 metric's Sum counts the drains in time and hides the misses: the dashboard plots
    misses per kind, SampleCount - Sum (drains finished minus drains in time)."""
    body = template["Resources"]["Dashboard"]["Properties"]["DashboardBody"]["Fn::Sub"]
    rendered = re.sub(r"\$\{([^}!]+)\}", lambda m: "x-" + m.group(1).replace(".", "-").replace(":", "-"), body)
    dash = json.loads(rendered)
    (widget,) = [w for w in dash["widgets"] if "missed" in w["properties"]["title"].lower()]
    metrics = widget["properties"]["metrics"]
    stats = {}
    for m in metrics:
        if isinstance(m[0], str):
            ns, name, dim, value, opts = m
            assert (ns, name, dim) == ("x-EmfNamespace", "DrainsBeforeDeadline", "Kind")
            assert opts["visible"] is False
            stats[opts["id"]] = (value, opts["stat"])
    exprs = [m[0]["expression"] for m in metrics if isinstance(m[0], dict)]
    misses = {}
    for e in exprs:
        mm = re.fullmatch(r"(\w+) - (\w+)", e)
        assert mm, e
        (k1, s1), (k2, s2) = stats[mm.group(1)], stats[mm.group(2)]
        assert k1 == k2 and (s1, s2) == ("SampleCount", "Sum"), e
        misses[k1] = e
    assert sorted(misses) == sorted(notice_kinds(repo))
    assert "'Sum', 60)\", \"id\": \"drains\"" not in body


def test_an_unclaimed_notice_survives_ten_minutes_of_failed_deliveries(template):
    # Each failed delivery comes back one visibility timeout later; the notice reaches the DLQ
    # after MaxReceiveCount of them. An apiserver outage or account-wide throttling of ten
    # minutes must not dead-letter a Health notice whose drain was never claimed.
    queue = template["Resources"]["InterruptionQueue"]["Properties"]
    receives = int(template["Parameters"]["MaxReceiveCount"]["Default"])
    assert receives * int(queue["VisibilityTimeout"]) >= 600, (receives, queue["VisibilityTimeout"])


def test_the_trigger_is_bounded_and_concurrency_can_be_reserved(template):
    props = template["Resources"]["InterruptionFunction"]["Properties"]
    (event,) = props["Events"].values()
    scaling = event["Properties"]["ScalingConfig"]
    assert scaling == {"MaximumConcurrency": {"Ref": "InterruptionMaxConcurrency"}}
    # SQS event sources refuse a maximum concurrency under 2.
    assert int(template["Parameters"]["InterruptionMaxConcurrency"]["MinValue"]) >= 2
    reserved = props["ReservedConcurrentExecutions"]["Fn::If"]
    assert reserved == ["ReserveInterruptionConcurrency",
                        {"Ref": "InterruptionReservedConcurrency"}, {"Ref": "AWS::NoValue"}]
    # Off by default: Lambda refuses a reservation that leaves too little unreserved.
    assert int(template["Parameters"]["InterruptionReservedConcurrency"]["Default"]) == 0


def test_a_saved_query_tells_one_drain_in_time_order(template):
    """"Why did this drain take four minutes?": every line of one drain by its drain id (the
    notice's event_id), oldest first, with the phase, the step, the next check and the pods
    moved."""
    queries = resources_of(template, "AWS::Logs::QueryDefinition")
    timeline = [q["Properties"] for q in queries.values()
                if "drain-timeline" in json.dumps(q["Properties"]["Name"])]
    assert len(timeline) == 1, "no saved drain-timeline query"
    (q,) = timeline
    assert q["LogGroupNames"] == [{"Ref": "InterruptionLogGroup"}]
    text = q["QueryString"]
    assert 'filter event_id = "DRAIN_ID"' in text
    assert "sort @timestamp asc" in text
    fields = text.splitlines()[0]
    for field in ("phase", "message as step", "next_check", "pods_evicted as pods_moved"):
        assert field in fields, field


def test_every_saved_query_is_documented_verbatim(template, repo):
    """docs/operations.md shows each saved query as the stack saves it."""
    docs = (repo / "docs/operations.md").read_text()
    for name, q in resources_of(template, "AWS::Logs::QueryDefinition").items():
        assert q["Properties"]["QueryString"].strip() in docs, name


def test_deleting_the_stack_restores_the_cluster_first(template):
    """The custom resource is served by the tick function and deleted before everything the tick
    needs to reach the cluster: its function (ServiceToken), role, log group and access entry."""
    (restore,) = resources_of(template, "Custom::PrewarmRestore").values()
    props = restore["Properties"]
    assert props["ServiceToken"] == {"Fn::GetAtt": ["TickFunction", "Arn"]}
    depends = restore["DependsOn"]
    assert {"TickRole", "TickLogGroup"} <= set([depends] if isinstance(depends, str) else depends)
    # The access entry is conditional: a Ref inside Fn::If depends on it only when it exists.
    assert props["AccessEntry"] == {"Fn::If": ["WantAccessEntries", {"Ref": "TickAccessEntry"}, "none"]}
    # A lost answer holds the stack minutes, not CloudFormation's default hour.
    assert 0 < props["ServiceTimeout"] <= 600
    # The request reaches the tick by an asynchronous invocation: throttled (TickReservedConcurrency
    # 1 while a tick runs, or the account's limit), Lambda retries it only up to the function's
    # MaximumEventAgeInSeconds. Shorter than the ServiceTimeout, a throttled Delete is dropped
    # and the stack waits the timeout out into DELETE_FAILED.
    tick = resources_of(template, "AWS::Serverless::Function")["TickFunction"]["Properties"]
    invoke = tick["EventInvokeConfig"]
    assert invoke["MaximumEventAgeInSeconds"] == props["ServiceTimeout"]
    assert invoke["MaximumRetryAttempts"] == 0


def test_paused_makes_the_tick_restore_and_observe(template):
    param = template["Parameters"]["Paused"]
    assert (param["Default"], set(param["AllowedValues"])) == ("No", {"Yes", "No"})
    fns = resources_of(template, "AWS::Serverless::Function")
    tick_env = fns["TickFunction"]["Properties"]["Environment"]["Variables"]
    assert tick_env["PAUSED"] == {"Ref": "Paused"}
    assert "PAUSED" not in fns["InterruptionFunction"]["Properties"]["Environment"]["Variables"]
    groups = template["Metadata"]["AWS::CloudFormation::Interface"]["ParameterGroups"]
    assert any("Paused" in g["Parameters"] for g in groups)


def test_the_decisions_query_answers_why_it_scaled(template):
    # "Why did it scale up at 03:12?" needs the inputs of the decision, not only its outcome:
    # which band and sizing were used, the seasonal forecast, the pods pending and serving, the
    # sizes before and after and the HPA floor (names as the tick's decision line logs them).
    query = template["Resources"]["DecisionLogQuery"]["Properties"]["QueryString"]
    fields = {f.strip() for f in query.splitlines()[0].removeprefix("fields").split(",")}
    assert {"observed", "forecast", "quantile", "band_source", "sizing", "seasonal",
            "seasonal_weight", "pending_pods", "serving_replicas", "size_before", "size_after",
            "floor_replicas", "hpa_floor", "action", "reason"} <= fields, fields


def test_the_dashboard_calls_arrival_rates_what_they_are(template):
    body = template["Resources"]["Dashboard"]["Properties"]["DashboardBody"]
    body = body["Fn::Sub"] if isinstance(body, dict) else body
    widgets = json.loads(body if isinstance(body, str) else body[0])["widgets"]
    for w in widgets:
        names = json.dumps(w["properties"].get("metrics", []))
        if "Forecast" in names:
            assert "requests/s" in w["properties"]["title"], w["properties"]["title"]
            assert "replicas" not in w["properties"]["title"], w["properties"]["title"]


def release_template(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "scripts/release_template.py"),
                           str(TEMPLATE), *args], capture_output=True, text=True)


def test_the_release_writes_the_source_url_only_when_given():
    def app_of(out: str) -> dict:
        template, matches = decode_str(out)
        assert not matches, matches
        return template["Metadata"]["AWS::ServerlessRepo::Application"]

    url = "https://github.com/acme/prewarm"
    given = release_template("1.2.3", "prewarm-1.2.3-arm64.zip", url)
    assert given.returncode == 0, given.stderr
    app = app_of(given.stdout)
    assert (app["SemanticVersion"], app["HomePageUrl"], app["SourceCodeUrl"]) == ("1.2.3", url, url)
    without = release_template("1.2.3", "prewarm-1.2.3-arm64.zip")
    assert without.returncode == 0, without.stderr
    assert not RELEASE_URL_KEYS & set(app_of(without.stdout))
    for bad in ("http://github.com/acme/prewarm", "github.com/acme/prewarm", "https://a b"):
        refused = release_template("1.2.3", "prewarm-1.2.3-arm64.zip", bad)
        assert refused.returncode != 0 and "SOURCE_URL" in refused.stderr, bad
