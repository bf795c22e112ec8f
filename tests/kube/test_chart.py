#!/usr/bin/python3
"""chart_render: the Helm chart charts/traceprof, rendered by scripts/helm_render.py.

Renders it with the required values only, with the bundled PostgreSQL, and
with existing secrets (mutual TLS, SDK uprobe, host ports); checks that
every document is YAML with apiVersion, kind and metadata.name; that the
chart's CRD is byte for byte crds/'s; the agent's capabilities and that it
is not privileged; the RBAC rules against the least-privilege lists; that
a missing required value, a misspelt key, a wrong type and a template
construct outside the renderer's subset are refused with the place named.
Then applies the manifests with the real kubectl to the test API server
(kube_test_apiserver.py), CRD first, reads them back with kubectl get, and
checks that a second apply changes nothing.
Usage: test_chart.py SOURCE_DIR
"""

import base64
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

SRC = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[2])
CHART = SRC / "charts/traceprof"
sys.path.insert(0, str(SRC / "scripts"))
import helm_render  # noqa: E402

failures = 0


def check(cond, what):
    global failures
    if cond:
        print(f"ok: {what}")
    else:
        failures += 1
        print(f"FAIL: {what}")


def docs_of(text):
    return [d for d in yaml.safe_load_all(text) if d]


def render(*sets, files=(), crds=False):
    return helm_render.render(CHART, "traceprof", "traceprof", files, sets, crds)


def refused(fn, needle):
    try:
        fn()
    except helm_render.RenderError as e:
        return needle in str(e), str(e)
    return False, "(rendered)"


def by_kind(docs, kind, name=None):
    return [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]


# ---- rendering ----
variants = {
    "required values": ["postgresql.existingSecret=traceprof-db"],
    "bundled PostgreSQL": ["postgresql.bundled.enabled=true",
                           "postgresql.bundled.persistence.enabled=true"],
    "no network policy": ["postgresql.existingSecret=x", "networkPolicy.enabled=false",
                          "agent.seccompProfile=Unconfined"],
    "existing secrets": ["postgresql.existingSecret=db", "postgresql.agentSecretKey=agent-uri",
                         "postgresql.controllerSecretKey=ctl-uri", "postgresql.migrate=false",
                         "controlAuth.existingSecret=tok",
                         "controlAuth.tls.serverSecret=agent-tls",
                         "controlAuth.tls.clientSecret=controller-tls",
                         "agent.sdkUprobe=true", "otlp.hostPort=true"],
}
rendered = {}
for what, sets in variants.items():
    text = render(*sets)
    docs = docs_of(text)
    rendered[what] = (text, docs)
    bad = [d for d in docs
           if not (d.get("apiVersion") and d.get("kind") and d.get("metadata", {}).get("name"))]
    check(docs and not bad, f"{what}: {len(docs)} documents, each with apiVersion, kind, name")

docs = rendered["required values"][1]
ds = by_kind(docs, "DaemonSet")[0]
dep = by_kind(docs, "Deployment")[0]
agent = ds["spec"]["template"]["spec"]
ctr = agent["containers"][0]
sc = ctr["securityContext"]
check(agent.get("hostPID") is True, "agent: hostPID")
check(sc.get("privileged") is False and sc.get("allowPrivilegeEscalation") is False,
      "agent: not privileged, no privilege escalation")
check(sc["capabilities"] == {"drop": ["ALL"],
                             "add": ["BPF", "PERFMON", "SYS_PTRACE", "DAC_READ_SEARCH"]},
      f"agent: exactly BPF, PERFMON, SYS_PTRACE, DAC_READ_SEARCH ({sc['capabilities']})")
mounts = {m["mountPath"]: m.get("readOnly", False) for m in ctr["volumeMounts"]}
check(mounts.get("/sys/kernel/btf") is True and mounts.get("/sys/fs/cgroup") is True,
      "agent: BTF and cgroup mounts read-only")
env = {e["name"]: e for e in ctr["env"]}
check(env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName",
      "agent: NODE_NAME from spec.nodeName")
check("--node=$(NODE_NAME)" in ctr["args"] and "--kube-in-cluster=on" in ctr["args"],
      "agent: node name and in-cluster pod names")
ports = {p["name"]: p for p in ctr["ports"]}
check(ports["control"]["containerPort"] == 4320 and ports["otlp-grpc"]["containerPort"] == 4317
      and ports["otlp-http"]["containerPort"] == 4318 and "hostPort" not in ports["otlp-grpc"],
      "agent: ports 4320, 4317, 4318, no host ports by default")
check({"operator": "Exists"} in agent["tolerations"], "agent: tolerates every taint")

c = dep["spec"]["template"]["spec"]
cc = c["containers"][0]
check(dep["spec"]["replicas"] == 2, "controller: 2 replicas")
check("--in-cluster" in cc["args"] and "--agent-port=4320" in cc["args"]
      and any(a.startswith("--agent-selector=app.kubernetes.io/name=traceprof-agent")
              for a in cc["args"]), "controller: Kubernetes mode args")
check(c["securityContext"]["runAsNonRoot"] is True
      and cc["securityContext"]["readOnlyRootFilesystem"] is True,
      "controller: non-root, read-only root file system")
check("--health-addr=:8081" in cc["args"] and cc["ports"] == [{"name": "health", "containerPort": 8081}]
      and cc["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
      and cc["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"},
      "controller: health endpoint on 8081, liveness /healthz, readiness /readyz")
check(cc["env"][0]["valueFrom"]["secretKeyRef"] == {"name": "traceprof-db", "key": "controller"},
      "controller: the controller role's conninfo from the Secret")
check(env["TRACEPROF_DB"]["valueFrom"]["secretKeyRef"] == {"name": "traceprof-db", "key": "writer"},
      "agent: the writer role's conninfo from the Secret")
job = by_kind(docs, "Job", "traceprof-migrate")
check(len(job) == 1 and job[0]["spec"]["template"]["spec"]["containers"][0]["command"][:2]
      == ["traceprof-db", "migrate"] and job[0]["spec"]["template"]["spec"]["containers"][0]
      ["env"][0]["valueFrom"]["secretKeyRef"] == {"name": "traceprof-db", "key": "owner"},
      "migration Job: traceprof-db migrate as the owner role")
check(agent["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
      and c["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"},
      "agent and controller: the runtime's default seccomp profile")
netpol = {d["metadata"]["name"]: d["spec"] for d in by_kind(docs, "NetworkPolicy")}
anp, cnp = netpol.get("traceprof-agent", {}), netpol.get("traceprof-controller", {})
check(anp.get("podSelector", {}).get("matchLabels", {}).get("app.kubernetes.io/name")
      == ds["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"]
      and anp.get("policyTypes") == ["Ingress"], "NetworkPolicy: selects the agent pods")
ingress = {tuple(sorted(p["port"] for p in r["ports"])): r["from"] for r in anp.get("ingress", [])}
ctl_labels = dep["spec"]["template"]["metadata"]["labels"]
check(set(ingress) == {(4320,), (4317, 4318)} and all(
          ctl_labels.get(k) == v for k, v in ingress[(4320,)][0]["podSelector"]["matchLabels"].items())
      and len(ingress[(4320,)]) == 1, f"NetworkPolicy: control port only from the controller pods ({ingress})")
check(ingress.get((4317, 4318)) == [{"namespaceSelector": {}}],
      "NetworkPolicy: OTLP from every pod of the cluster by default")
check([p["port"] for r in cnp.get("ingress", []) for p in r["ports"]] == [8081],
      "NetworkPolicy: the controller takes only its health port")
tok = by_kind(docs, "Secret", "traceprof-control-token")
check(len(tok) == 1 and len(tok[0]["data"]["token"]) == 64, "control token Secret generated")
# Control authentication is on by default: both sides get the token, in
# files that pass the programs' checks (not writable by group or others;
# the controller, not root, reads it through its group).
token_b64 = tok[0]["data"]["token"]
check(len(base64.b64decode(token_b64)) >= 32, "control token: at least 32 characters")
check("--control-token-file=/etc/traceprof/token/token" in ctr["args"]
      and "--agent-token-file=/etc/traceprof/token/token" in cc["args"],
      "control token: the agent requires it, the controller sends it")
avol = {v["name"]: v for v in agent["volumes"]}
cvol = {v["name"]: v for v in c["volumes"]}
check(avol["token"]["secret"].get("defaultMode") == 0o400
      and cvol["token"]["secret"].get("defaultMode") == 0o440
      and c["securityContext"].get("fsGroup") == c["securityContext"]["runAsGroup"],
      "control token files: 0400 for the agent, 0440 with fsGroup for the controller "
      f"({avol['token']['secret'].get('defaultMode')}, {cvol['token']['secret'].get('defaultMode')})")

# RBAC: exactly the least-privilege lists.


def rules(kind, name):
    r = by_kind(docs, kind, name)[0]["rules"]
    return sorted((tuple(x["apiGroups"]), tuple(x["resources"]), tuple(sorted(x["verbs"])))
                  for x in r)


check(rules("ClusterRole", "traceprof-controller") == sorted([
    (("traceprof.dev",), ("traceprofiletriggers",), ("get", "list", "watch")),
    (("traceprof.dev",), ("traceprofiletriggers/status",), ("patch", "update")),
    (("",), ("pods",), ("get", "list", "watch")),
    (("",), ("events",), ("create", "patch")),
    (("events.k8s.io",), ("events",), ("create", "patch"))]), "RBAC: controller ClusterRole")
check(rules("Role", "traceprof-controller-leader") ==
      [(("coordination.k8s.io",), ("leases",), ("create", "get", "update"))],
      "RBAC: controller leader-election Role")
check(rules("ClusterRole", "traceprof-agent") == [(("",), ("pods",), ("get", "list", "watch"))],
      "RBAC: agent ClusterRole")

b = rendered["bundled PostgreSQL"][1]
check(len(by_kind(b, "StatefulSet")) == 1 and
      by_kind(b, "StatefulSet")[0]["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]
      ["requests"]["storage"] == "8Gi", "bundled: StatefulSet with a PVC")
check(by_kind(b, "DaemonSet")[0]["spec"]["template"]["spec"]["containers"][0]["env"][1]
      ["valueFrom"]["secretKeyRef"] == {"name": "traceprof-postgresql", "key": "writer"},
      "bundled: agents read the writer's conninfo of the bundled Secret")
bsec = by_kind(b, "Secret", "traceprof-postgresql")[0]["data"]
bconn = {k: base64.b64decode(bsec[k]).decode() for k in ("owner", "writer", "reader", "controller")}
check(all(f"user=traceprof_{k} " in v for k, v in bconn.items())
      and len({v.rsplit("password=", 1)[1] for v in bconn.values()}) == 4,
      "bundled: one login role and password per part")
binit = by_kind(b, "ConfigMap", "traceprof-postgresql-init")[0]["data"]["10-traceprof-roles.sh"]
check("NOSUPERUSER" in binit and "OWNER TO traceprof_owner" in binit,
      "bundled: the init script makes non-superuser login roles and the owner")
check(not by_kind(e, "Job") if (e := rendered["existing secrets"][1]) else False,
      "postgresql.migrate=false: no migration Job")

e = rendered["existing secrets"][1]
n = rendered["no network policy"][1]
check(not by_kind(n, "NetworkPolicy") and by_kind(n, "DaemonSet")[0]["spec"]["template"]["spec"]
      ["securityContext"]["seccompProfile"]["type"] == "Unconfined",
      "networkPolicy.enabled=false: no NetworkPolicy; agent.seccompProfile=Unconfined")
ectr = by_kind(e, "DaemonSet")[0]["spec"]["template"]["spec"]["containers"][0]
check("SYS_ADMIN" in ectr["securityContext"]["capabilities"]["add"],
      "sdkUprobe adds SYS_ADMIN")
check(ectr["ports"][1].get("hostPort") == 4317, "otlp.hostPort sets host ports")
check(not by_kind(e, "Secret"), "existing secrets: the chart makes no Secret")
check("--control-tls-cert=/etc/traceprof/tls/tls.crt" in ectr["args"], "agent: mutual TLS")

# CRD in the chart = crds/
a = (CHART / "crds/traceprof.dev_traceprofiletriggers.yaml").read_bytes()
check(a == (SRC / "crds/traceprof.dev_traceprofiletriggers.yaml").read_bytes(),
      "the chart's CRD is byte-identical to crds/")

# refusals
ok, msg = refused(lambda: render(), "postgresql.existingSecret")
check(ok, f"no database: refused naming postgresql.existingSecret ({msg.splitlines()[0]})")
with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
    f.write("agent:\n  frequncy: 99\n")
    f.flush()
    ok, msg = refused(lambda: render("postgresql.existingSecret=x", files=[f.name]),
                      "agent.frequncy: unknown key")
    check(ok, f"misspelt key refused ({msg.splitlines()[-1]})")
ok, msg = refused(lambda: render("postgresql.existingSecret=x", "controlPort=http"),
                  "controlPort")
check(ok, f"wrong type refused ({msg.splitlines()[-1]})")
tmp = Path(tempfile.mkdtemp())
try:
    shutil.copytree(CHART, tmp / "c")
    with open(tmp / "c/templates/service-otlp.yaml", "a") as f:
        f.write("\n{{ tpl .Values.x . }}\n")
    ok, msg = refused(lambda: helm_render.render(tmp / "c", sets=["postgresql.existingSecret=x"]),
                      "templates/service-otlp.yaml:")
    check(ok and "tpl" in msg, f"unsupported construct refused with file and line ({msg})")
finally:
    shutil.rmtree(tmp)

# ---- kubectl apply to the test API server ----
if not shutil.which("kubectl") or not shutil.which("openssl"):
    print("SKIP: kubectl apply (kubectl or openssl missing)")
    sys.exit(1 if failures else 0)
work = Path(tempfile.mkdtemp(prefix="traceprof-chart."))
server = None
try:
    before = time.time()
    server = subprocess.Popen([sys.executable, str(SRC / "tests/kube/kube_test_apiserver.py"),
                               "--state-dir", str(work / "state")],
                              stdout=open(work / "server.log", "w"), stderr=subprocess.STDOUT)
    kc = work / "state/kubeconfig"
    for _ in range(100):
        if kc.exists() and kc.stat().st_mtime >= before:
            break
        time.sleep(0.1)

    def kubectl(*args, stdin=None):
        return subprocess.run(["kubectl", "--kubeconfig", str(kc), *args], input=stdin,
                              capture_output=True, text=True)

    (work / "ns.yaml").write_text("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: traceprof\n")
    r = kubectl("apply", "-f", str(CHART / "crds"))
    check(r.returncode == 0, f"kubectl apply the CRD {r.stderr.strip()}")
    text = rendered["required values"][0]
    (work / "all.yaml").write_text(text)
    r = kubectl("apply", "-f", str(work / "ns.yaml"), "-f", str(work / "all.yaml"))
    check(r.returncode == 0 and "created" in r.stdout, f"kubectl apply: {r.stdout.count(chr(10))} "
          f"objects {r.stderr.strip()}")
    print(r.stdout, end="")
    r = kubectl("get", "-n", "traceprof", "daemonset,deployment,serviceaccount,secret,service,"
                "role,rolebinding,networkpolicy", "-o", "name")
    got = set(r.stdout.split())
    want = {"daemonset.apps/traceprof-agent", "deployment.apps/traceprof-controller",
            "serviceaccount/traceprof-agent", "serviceaccount/traceprof-controller",
            "secret/traceprof-control-token", "service/traceprof-otlp",
            "role.rbac.authorization.k8s.io/traceprof-controller-leader",
            "rolebinding.rbac.authorization.k8s.io/traceprof-controller-leader",
            "networkpolicy.networking.k8s.io/traceprof-agent",
            "networkpolicy.networking.k8s.io/traceprof-controller"}
    check(want <= got, f"kubectl get shows them (missing: {sorted(want - got)})")
    r = kubectl("get", "clusterrole,clusterrolebinding", "-o", "name")
    check("clusterrole.rbac.authorization.k8s.io/traceprof-agent" in r.stdout
          and "clusterrolebinding.rbac.authorization.k8s.io/traceprof-controller" in r.stdout,
          "kubectl get shows the cluster roles and bindings")
    r = kubectl("apply", "-f", str(work / "ns.yaml"), "-f", str(work / "all.yaml"))
    lines = [ln for ln in r.stdout.splitlines() if ln.strip()]
    check(r.returncode == 0 and lines and all(ln.endswith(" unchanged") for ln in lines),
          f"a second apply changes nothing ({[ln for ln in lines if not ln.endswith('unchanged')]})")
finally:
    if server:
        server.terminate()
        server.wait(10)
    shutil.rmtree(work, ignore_errors=True)

print(f"{'FAILED' if failures else 'passed'}: {failures} failure(s)")
sys.exit(1 if failures else 0)
