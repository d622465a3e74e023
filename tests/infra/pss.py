"""The `restricted` Pod Security Standard (kubernetes.io/docs/concepts/security/pod-security-standards,
the checks of k8s.io/pod-security-admission at `latest`) restated for the pod specs prewarm and
its chart create, plus what prewarm adds on top: no service-account token, a read-only root."""

ALLOWED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
                   "persistentVolumeClaim", "projected", "secret"}


def restricted_violations(spec: dict) -> list[str]:
    out = []
    pod_sc = spec.get("securityContext") or {}
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(key):
            out.append(key)
    for v in spec.get("volumes") or []:
        kinds = set(v) - {"name"}
        if not kinds <= ALLOWED_VOLUMES:
            out.append(f"volume {v['name']}: {sorted(kinds)}")
    if pod_sc.get("runAsUser") == 0:
        out.append("pod runAsUser 0")
    if spec.get("automountServiceAccountToken") is not False:
        out.append("automountServiceAccountToken is not false")
    for c in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        sc = c.get("securityContext") or {}
        name = c["name"]
        if sc.get("privileged"):
            out.append(f"{name}: privileged")
        if sc.get("allowPrivilegeEscalation") is not False:
            out.append(f"{name}: allowPrivilegeEscalation is not false")
        caps = sc.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            out.append(f"{name}: capabilities.drop lacks ALL")
        if set(caps.get("add") or []) - {"NET_BIND_SERVICE"}:
            out.append(f"{name}: capabilities.add")
        if sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot")) is not True:
            out.append(f"{name}: runAsNonRoot is not true")
        if sc.get("runAsUser", pod_sc.get("runAsUser")) in (0, None):
            out.append(f"{name}: no non-zero runAsUser")
        seccomp = (sc.get("seccompProfile") or pod_sc.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            out.append(f"{name}: seccompProfile {seccomp}")
        if sc.get("readOnlyRootFilesystem") is not True:
            out.append(f"{name}: readOnlyRootFilesystem is not true")
        for port in c.get("ports") or []:
            if port.get("hostPort"):
                out.append(f"{name}: hostPort")
    return out
