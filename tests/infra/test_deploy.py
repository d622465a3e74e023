"""What makes the first `sam build && sam deploy` work or fail early (issue 12): samconfig cannot
reach a placeholder cluster, the template's Rules refuse combinations that would deploy and then
fail, parameter bounds equal the binary's, the interruption function gets no metric setting, an
alarm watches the errors the handlers report, `make deploy` finds ziglang.

Rules are evaluated by a small interpreter of the rule functions CloudFormation allows in Rules
(Equals, Not, And, Or, Contains, EachMemberEquals, Ref); the expected verdicts are written by hand.
"""

import os
import re
import subprocess
import tomllib
from pathlib import Path

import pytest

from infra_paths import REPO

TEMPLATE = REPO / "template.yaml"


# ------------------------------------------------------------------ samconfig

def samconfig() -> dict:
    return tomllib.loads((REPO / "samconfig.toml").read_text())


def overrides(entry) -> dict[str, str]:
    items = entry if isinstance(entry, list) else re.findall(r'(\S+?=(?:"[^"]*"|\S+))', entry)
    return dict(i.split("=", 1) for i in items)


def test_samconfig_cannot_deploy_to_a_placeholder_cluster(template):
    """Every deploy environment of samconfig leaves ClusterName to the person deploying, and the
    template has no default for it: CloudFormation refuses the change set before creating a stack
    (no ROLLBACK_COMPLETE stack to delete by hand)."""
    assert "Default" not in template["Parameters"]["ClusterName"]
    envs = {name: env["deploy"]["parameters"] for name, env in samconfig().items()
            if isinstance(env, dict) and "deploy" in env}
    assert envs, "samconfig.toml has no deploy environment"
    for name, deploy in envs.items():
        given = overrides(deploy.get("parameter_overrides", []))
        assert "ClusterName" not in given, f"samconfig [{name}] names a cluster: {given['ClusterName']}"
        values = {p: d["Default"] for p, d in template["Parameters"].items() if "Default" in d} | given
        assert "ClusterName" not in values, name


# ------------------------------------------------------------------ Rules


def evaluate(node, params: dict):
    """Value of a rule expression; list parameters are lists of strings as CloudFormation passes them."""
    if isinstance(node, dict):
        ((fn, arg),) = node.items()
        if fn == "Ref":
            return params[arg]
        if fn == "Fn::Equals":
            a, b = (evaluate(x, params) for x in arg)
            return a == b
        if fn == "Fn::Not":
            return not evaluate(arg[0], params)
        if fn == "Fn::And":
            return all(evaluate(x, params) for x in arg)
        if fn == "Fn::Or":
            return any(evaluate(x, params) for x in arg)
        if fn == "Fn::Contains":
            return evaluate(arg[1], params) in evaluate(arg[0], params)
        if fn == "Fn::EachMemberEquals":
            return all(v == evaluate(arg[1], params) for v in evaluate(arg[0], params))
        raise AssertionError(f"{fn} is not a rule function")
    return node


def refused_by(template, **given) -> set[str]:
    params = {}
    for name, p in template["Parameters"].items():
        value = given.get(name, p.get("Default"))
        if p["Type"] == "CommaDelimitedList":
            value = [v.strip() for v in (value or "").split(",")]
        params[name] = value
    refused = set()
    for name, rule in template.get("Rules", {}).items():
        if "RuleCondition" in rule and not evaluate(rule["RuleCondition"], params):
            continue
        if not all(evaluate(a["Assert"], params) for a in rule["Assertions"]):
            refused.add(name)
    return refused


GOOD = dict(ClusterName="prod", MetricSource="amp", AmpWorkspaceId="ws-1234")

RULE_CASES = [
    ("good", {}, set()),
    ("placeholder cluster", dict(ClusterName="my-cluster"), {"ClusterNameIsNotThePlaceholder"}),
    ("amp without workspace", dict(AmpWorkspaceId=""), {"AmpNeedsAWorkspace"}),
    ("prometheus without url", dict(MetricSource="prometheus"), {"PrometheusNeedsAUrl"}),
    ("prometheus with url", dict(MetricSource="prometheus", PrometheusUrl="http://prom:9090"), set()),
    ("cloudwatch without namespace", dict(MetricSource="cloudwatch"), {"CloudwatchNeedsANamespace"}),
    ("cloudwatch with namespace", dict(MetricSource="cloudwatch", CloudwatchNamespace="Inference"), set()),
    ("subnets without security groups", dict(SubnetIds="subnet-1,subnet-2"), {"SubnetsNeedSecurityGroups"}),
    ("security groups without subnets", dict(SecurityGroupIds="sg-1"), {"SecurityGroupsNeedSubnets"}),
    ("vpc", dict(SubnetIds="subnet-1,subnet-2", SecurityGroupIds="sg-1"), set()),
    ("targets in the variable", dict(TargetsConfigMap="", PrewarmTargets='[{"name":"a"}]'), set()),
    ("targets twice", dict(PrewarmTargets='[{"name":"a"}]'), {"OneSourceOfTargets"}),
    ("no targets", dict(TargetsConfigMap=""), {"OneSourceOfTargets"}),
]


@pytest.mark.parametrize("case,given,refused", RULE_CASES, ids=[c[0] for c in RULE_CASES])
def test_rules_refuse_what_would_fail_after_deploying(template, case, given, refused):
    assert refused_by(template, **(GOOD | given)) == refused


def test_the_defaults_alone_are_refused(template):
    """Default MetricSource=amp without a workspace: refused instead of an Init failure."""
    assert "AmpNeedsAWorkspace" in refused_by(template, ClusterName="prod")


# ------------------------------------------------------------------ bounds equal validate()

def rust_bounds(path: Path, const: str) -> dict[str, tuple[float, float]]:
    text = path.read_text()
    body = text[text.index(f"pub const {const}"):]
    body = body[:body.index("];")]
    found = re.findall(r'\("([A-Z_]+)",\s*([-0-9._]+),\s*([-0-9._]+)\)', body)
    assert found, f"no bounds in {const}"
    return {n: (float(lo.replace("_", "")), float(hi.replace("_", ""))) for n, lo, hi in found}


def env_to_parameter(template) -> dict[str, str]:
    out = {}
    envs = [template["Globals"]["Function"]["Environment"]["Variables"]] + [
        r["Properties"].get("Environment", {}).get("Variables", {})
        for r in template["Resources"].values() if r["Type"] == "AWS::Serverless::Function"]
    for env in envs:
        for var, value in env.items():
            if isinstance(value, dict) and set(value) == {"Ref"}:
                out[var] = value["Ref"]
    return out


def test_parameter_bounds_equal_the_binarys(template):
    """A value CloudFormation accepts must not fail at Init, and the reverse."""
    tpl = template
    code = rust_bounds(REPO / "src/core/spec/policy.rs", "POLICY_BOUNDS") | rust_bounds(REPO / "src/config/interruption.rs", "INTERRUPTION_BOUNDS")
    params = env_to_parameter(tpl)
    assert {"LEAD_TIME_SECONDS", "ERROR_QUANTILE", "RECHECK_SECONDS"} <= set(code)
    for var, (lo, hi) in code.items():
        p = tpl["Parameters"][params[var]]
        assert p["Type"] == "Number", var
        assert (float(p["MinValue"]), float(p["MaxValue"])) == (lo, hi), f"{params[var]} ({var})"
        assert lo <= float(p["Default"]) <= hi, var


def test_the_scale_down_delay_pattern_admits_the_binarys_values(template):
    """SCALE_DOWN_DELAY_SECONDS is seconds within SCALE_DOWN_DELAY_BOUNDS or `lead`: its string
    parameter's pattern admits those ends and the word, and nothing just beyond them."""
    text = (REPO / "src/core/spec/policy.rs").read_text()
    lo, hi = re.search(r'SCALE_DOWN_DELAY_BOUNDS: \(&str, f64, f64\) =\s*\("SCALE_DOWN_DELAY_SECONDS",\s*([-0-9._]+),\s*([-0-9._]+)\)', text).groups()
    assert (float(lo), float(hi.replace("_", ""))) == (0.0, 86400.0)
    p = template["Parameters"][env_to_parameter(template)["SCALE_DOWN_DELAY_SECONDS"]]
    assert p["Type"] == "String"
    admits = lambda v: re.fullmatch(p["AllowedPattern"], v) is not None  # noqa: E731
    for v in ["lead", "0", "0.5", "300", "9999.9", "10000", "79999", "85999", "86399.9", "86400"]:
        assert admits(v), v
    for v in ["-1", "86400.5", "86401", "86500", "90000", "100000", "soon", "", "300s"]:
        assert not admits(v), v
    assert admits(str(p["Default"]))


def test_the_bounds_reader_reads_rust():
    tmp = REPO / "target-test-bounds.rs"
    try:
        tmp.write_text('pub const X: [(&str, f64, f64); 2] = [\n    ("A_B", 0.5, 86_400.0),\n    ("C", 1.0, 3.0),\n];\n')
        assert rust_bounds(tmp, "X") == {"A_B": (0.5, 86400.0), "C": (1.0, 3.0)}
    finally:
        tmp.unlink()


# ------------------------------------------------------------------ one function, its own settings

def tick_only_vars() -> list[str]:
    text = (REPO / "src/config/tick.rs").read_text()
    body = text[text.index("pub const TICK_ONLY_VARS"):]
    names = re.findall(r'"([A-Z_]+)"', body[:body.index("];")])
    assert "METRIC_SOURCE" in names and "AMP_WORKSPACE_URL" in names
    return names


def test_the_interruption_function_gets_no_metric_setting(template):
    env = dict(template["Globals"]["Function"]["Environment"]["Variables"])
    env.update(template["Resources"]["InterruptionFunction"]["Properties"]["Environment"]["Variables"])
    assert not set(tick_only_vars()) & set(env)
    tick = template["Resources"]["TickFunction"]["Properties"]["Environment"]["Variables"]
    assert set(tick_only_vars()) <= set(tick)


def test_tick_concurrency_reservation_is_optional_and_off_by_default(template):
    p = template["Parameters"]["TickReservedConcurrency"]
    assert p["Default"] == "none" and set(p["AllowedValues"]) == {"none", "1"}
    reserved = template["Resources"]["TickFunction"]["Properties"]["ReservedConcurrentExecutions"]
    assert reserved == {"Fn::If": ["ReserveTickConcurrency", 1, {"Ref": "AWS::NoValue"}]}
    assert template["Conditions"]["ReserveTickConcurrency"] == {"Fn::Equals": [{"Ref": "TickReservedConcurrency"}, "1"]}


# ------------------------------------------------------------------ shouting

def test_an_alarm_watches_handled_errors_without_dimensions(template):
    """The handlers report 401/403/AMP denied as EMF Errors, never as a failed invocation."""
    alarms = [a["Properties"] for a in template["Resources"].values() if a["Type"] == "AWS::CloudWatch::Alarm"]
    handled = [a for a in alarms if a.get("Namespace") == {"Ref": "EmfNamespace"}]
    assert len(handled) == 1
    (a,) = handled
    assert a["MetricName"] == "Errors" and "Dimensions" not in a and "Metrics" not in a
    assert (a["ComparisonOperator"], a["Threshold"], a["Statistic"]) == ("GreaterThanThreshold", 0, "Sum")
    # The binary publishes that series: an EMF directive with an empty dimension set.
    telemetry = (REPO / "src/telemetry.rs").read_text()
    assert '"Dimensions": [[]]' in telemetry and 'pub const ERRORS: &str = "Errors"' in telemetry


def test_no_permission_for_calls_the_code_never_makes(template):
    text = TEMPLATE.read_text()
    assert "cloudwatch:PutMetricData" not in re.sub(r"#.*", "", text), "EMF needs no PutMetricData"
    src = "\n".join(p.read_text() for p in (REPO / "src").rglob("*.rs"))
    assert "put_metric_data" not in src
    # GetMetricData only for MetricSource=cloudwatch.
    stmts = template["Resources"]["TickRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
    gmd = [s for s in stmts if "GetMetricData" in str(s)]
    assert len(gmd) == 1 and gmd[0]["Fn::If"][0] == "IsCloudwatch"
    assert template["Conditions"]["IsCloudwatch"] == {"Fn::Equals": [{"Ref": "MetricSource"}, "cloudwatch"]}


# ------------------------------------------------------------------ make deploy

LAMBDA_VENV = Path.home() / ".cache/prewarm/venv/lambda/bin"


def deploy_paths(target: str = "deploy", sam_lines: int = 2) -> list[str]:
    out = subprocess.run(["make", "-n", target], cwd=REPO, capture_output=True, text=True, check=True).stdout
    lines = [l for l in out.splitlines() if re.search(r"\bsam (build|deploy)\b", l)]
    assert len(lines) == sam_lines, out
    return [re.search(r'PATH="([^"]*)"', l).group(1) for l in lines]


def test_make_deploy_puts_the_lambda_venv_first():
    """cargo-lambda runs `python3 -m ziglang`: the first python3 on PATH must be the lambda venv's.
    The same for `make sam-build`, the arm64 build `make test` runs and checks."""
    for path in deploy_paths() + deploy_paths("sam-build", 1):
        dirs = path.split(":")
        assert dirs[0].endswith("venv/lambda/bin"), dirs[:3]
        assert any(d.endswith("venv/infra/bin") for d in dirs), "sam comes from the infra venv"


def test_make_test_builds_and_checks_the_arm64_artifact(template):
    out = subprocess.run(["make", "-n", "test"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert re.search(r"\bsam build --no-cached\n", out), out
    assert "pytest -q tests/build" in out
    # A plain `sam build` (the default config env, no overrides) builds the template's default.
    assert template["Parameters"]["Architecture"]["Default"] == "arm64"
    assert "parameter_overrides" not in (REPO / "samconfig.toml").read_text().split(
        "[default.build.parameters]")[1].split("\n[")[0]


@pytest.mark.skipif(not (LAMBDA_VENV / "python3").exists(), reason="lambda venv not installed (tests/stack/install)")
def test_make_deploys_path_finds_ziglang_and_sam():
    path = deploy_paths()[0]
    env = dict(os.environ, PATH=path)
    subprocess.run(["python3", "-c", "import ziglang"], env=env, check=True)
    sam = subprocess.run(["bash", "-c", "command -v sam"], env=env, capture_output=True, text=True)
    infra_sam = Path.home() / ".cache/prewarm/venv/infra/bin/sam"
    if infra_sam.exists():
        assert sam.stdout.strip() == str(infra_sam)


# ------------------------------------------------------------------ the guided deploy

def test_samconfig_pins_no_region():
    """A region in the tracked samconfig sends every user's stack there, whatever their cluster's
    region: the EKS access entries then fail and the first stack ends in ROLLBACK_COMPLETE. The
    region comes from the user's AWS configuration (or the guided deploy's question)."""
    def regions(node, where=""):
        if isinstance(node, dict):
            for k, v in node.items():
                if k == "region":
                    yield f"{where}.{k}"
                yield from regions(v, f"{where}.{k}")
    assert list(regions(samconfig())) == []
    assert all(not env.get(cmd, {}).get("parameters", {}).get("save_params")
               for env in samconfig().values() if isinstance(env, dict) for cmd in env)


def test_the_guided_deploy_saves_its_answers_outside_the_repository():
    """`sam deploy --guided` writes every answer (cluster name, workspace id, topic ARN) into the
    config file it read: that must not be the tracked samconfig.toml."""
    out = subprocess.run(["make", "-n", "deploy"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    (line,) = [l for l in out.splitlines() if re.search(r"\bsam deploy\b", l)]
    assert "--guided" in line
    m = re.search(r"--config-file[ =](\S+)", line)
    assert m, line
    path = Path(m.group(1).strip("'\""))
    assert path.is_absolute() and REPO not in path.parents, path


def test_every_parameter_is_in_exactly_one_group_in_prompt_order(template):
    """The console (and the Serverless Application Repository) shows parameters by the
    CloudFormation Interface groups; `sam deploy --guided` asks them in template order. Both
    follow the same groups."""
    interface = template["Metadata"]["AWS::CloudFormation::Interface"]
    groups = interface["ParameterGroups"]
    grouped = [p for g in groups for p in g["Parameters"]]
    assert sorted(grouped) == sorted(template["Parameters"]), "every parameter once, none unknown"
    assert len(grouped) == len(set(grouped)), [p for p in grouped if grouped.count(p) > 1]
    assert all(g["Label"]["default"].strip() for g in groups)
    assert list(template["Parameters"]) == grouped, "template order = group order (the guided prompts)"
    # The one question without a default is the first one asked.
    undefaulted = [p for p, d in template["Parameters"].items() if "Default" not in d]
    assert undefaulted == ["ClusterName"] and grouped[0] == "ClusterName"


def test_make_deploy_installs_only_what_deploy_needs():
    """A user's `make deploy` must not apt-get, stop their Prometheus service or build the test
    stack's venvs: only sam (infra venv) and cargo-lambda + zig (lambda venv)."""
    for target in ("deploy", "build"):
        out = subprocess.run(["make", "-n", target], cwd=REPO, capture_output=True, text=True, check=True).stdout
        assert "tests/stack/install" not in out, target
        assert "infra/tools.sh lambda" in out, target
    tools = (REPO / "infra/tools.sh").read_text()
    assert "apt-get" not in tools and "systemctl" not in tools
    assert not re.search(r"\bvenv (moto|localstack|e2e)\b", tools)


def test_a_template_over_the_inline_limit_is_deployed_through_s3(repo):
    """CloudFormation takes at most 51,200 bytes of template inline; a larger one must go through
    S3, which `sam deploy` does when samconfig says resolve_s3 (or --s3-bucket is given)."""
    size = len((repo / "template.yaml").read_bytes())
    config = tomllib.loads((repo / "samconfig.toml").read_text())
    deploys = {env: tables["deploy"]["parameters"] for env, tables in config.items()
               if isinstance(tables, dict) and "deploy" in tables}
    assert deploys, "samconfig.toml has no deploy section"
    if size > 51_200:
        for env, params in deploys.items():
            assert params.get("resolve_s3") is True or params.get("s3_bucket"), (env, size)
