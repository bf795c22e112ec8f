#!/usr/bin/python3
"""kube_apiserver_protocol: the Kubernetes API semantics a controller relies
on, checked against the test API server (kube_test_apiserver.py) with a small
HTTPS client of the standard library (the server's code is not imported):
optimistic concurrency, the status subresource, selectors, limit/continue,
watch order, bookmarks, 410 Expired, selector watches, timeoutSeconds, leases
and events.

Usage: test_protocol.py SOURCE_DIR
"""

import http.client
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time

SRC = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
failures = 0


def check(cond, what):
    global failures
    print(("ok: " if cond else "FAIL: ") + what)
    if not cond:
        failures += 1


class Server:
    def __init__(self, work, *args):
        self.state = os.path.join(work, "state")
        os.makedirs(self.state, exist_ok=True)
        start = time.time()
        time.sleep(0.01)
        self.proc = subprocess.Popen(
            ["/usr/bin/python3", os.path.join(SRC, "tests/kube/kube_test_apiserver.py"),
             "--state-dir", self.state, "--log", os.path.join(work, "requests.log")] +
            list(args))
        kc = os.path.join(self.state, "kubeconfig")
        for _ in range(100):
            if os.path.exists(kc) and os.stat(kc).st_mtime >= start:
                break
            time.sleep(0.1)
        else:
            sys.exit("the server did not start")
        self.port = int(open(os.path.join(self.state, "port")).read())
        self.token = open(os.path.join(self.state, "token")).read().strip()
        self.ctx = ssl.create_default_context(cafile=os.path.join(self.state, "ca.crt"))

    def conn(self, timeout=10):
        return http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx,
                                           timeout=timeout)

    def req(self, method, path, body=None, ctype="application/json"):
        c = self.conn()
        h = {"Authorization": "Bearer " + self.token, "Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            h["Content-Type"] = ctype
        c.request(method, path, body=data, headers=h)
        r = c.getresponse()
        out = json.loads(r.read() or b"null")
        c.close()
        return r.status, out

    def watch(self, path, timeout=10):
        """Yields watch events; stops when the server ends the stream."""
        c = self.conn(timeout)
        c.request("GET", path, headers={"Authorization": "Bearer " + self.token})
        r = c.getresponse()
        assert r.status == 200, r.status
        while True:
            line = r.readline()
            if not line:
                break
            yield json.loads(line)
        c.close()

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(5)


def pod(name, labels=None, node=None):
    p = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {}},
         "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    if node:
        p["spec"]["nodeName"] = node
    return p


def cm(name, labels=None, data=None):
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "labels": labels or {}}, "data": data or {}}


def main():
    work = tempfile.mkdtemp(prefix="traceprof-kubeproto.")
    srv = None
    try:
        srv = Server(work, "--history", "5", "--bookmark-interval", "0.3")
        run(srv)
    finally:
        if srv:
            srv.stop()
        shutil.rmtree(work, ignore_errors=True)
    print("%d failed" % failures)
    sys.exit(1 if failures else 0)


def run(s):
    P = "/api/v1/namespaces/default/pods"
    # Optimistic concurrency: a PUT with a stale resourceVersion is a 409 Conflict.
    st, a = s.req("POST", P, pod("a", {"app": "pay"}, "node-1"))
    check(st == 201 and a["metadata"]["generation"] == 1 and a["metadata"]["uid"],
          "create pod: 201, generation 1, uid")
    stale = json.loads(json.dumps(a))
    a["spec"]["containers"][0]["image"] = "busybox:2"
    st, a2 = s.req("PUT", P + "/a", a)
    check(st == 200 and a2["metadata"]["generation"] == 2 and
          int(a2["metadata"]["resourceVersion"]) > int(a["metadata"]["resourceVersion"]),
          "PUT: new resourceVersion, generation 2")
    stale["spec"]["containers"][0]["image"] = "busybox:3"
    st, e = s.req("PUT", P + "/a", stale)
    check(st == 409 and e["reason"] == "Conflict" and e["message"] ==
          'Operation cannot be fulfilled on pods "a": the object has been modified; please '
          'apply your changes to the latest version and try again', "stale PUT: 409 Conflict")
    st, e = s.req("POST", P, pod("a"))
    check(st == 409 and e["reason"] == "AlreadyExists" and e["message"] ==
          'pods "a" already exists', "second create: 409 AlreadyExists")
    st, e = s.req("GET", P + "/nope")
    check(st == 404 and e["message"] == 'pods "nope" not found' and
          e["details"]["kind"] == "pods", "missing pod: 404 NotFound")
    st, e = s.req("PATCH", P + "/a", {"metadata": {"resourceVersion": "1"}, "spec": {}},
                  "application/merge-patch+json")
    check(st == 409 and e["reason"] == "Conflict", "merge patch with a stale RV: 409")

    # The status subresource changes only status, without a generation bump;
    # the main resource ignores status.
    a2["status"] = {"phase": "Running"}
    a2["spec"]["containers"][0]["image"] = "ignored"
    st, a3 = s.req("PUT", P + "/a/status", a2)
    check(st == 200 and a3["status"]["phase"] == "Running" and
          a3["spec"]["containers"][0]["image"] == "busybox:2" and
          a3["metadata"]["generation"] == 2,
          "PUT status: status changed, spec and generation unchanged")
    a3["status"] = {"phase": "Failed"}
    a3["metadata"]["labels"]["x"] = "y"
    st, a4 = s.req("PUT", P + "/a", a3)
    check(st == 200 and a4["status"]["phase"] == "Running" and
          a4["metadata"]["generation"] == 2 and a4["metadata"]["labels"]["x"] == "y",
          "PUT main resource: status ignored, label-only change keeps generation")
    st, a5 = s.req("PATCH", P + "/a/status", {"status": {"phase": "Succeeded"}},
                   "application/merge-patch+json")
    check(st == 200 and a5["status"]["phase"] == "Succeeded", "merge patch on status")
    st, a6 = s.req("PATCH", P + "/a", [{"op": "replace", "path": "/metadata/labels/x",
                                        "value": "z"}], "application/json-patch+json")
    check(st == 200 and a6["metadata"]["labels"]["x"] == "z", "JSON patch")

    # Lists: label and field selectors, limit/continue.
    s.req("POST", P, pod("b", {"app": "pay", "tier": "web"}, "node-2"))
    s.req("POST", P, pod("c", {"app": "shop"}, "node-1"))
    s.req("POST", P, pod("d", {}, "node-2"))
    names = lambda l: [o["metadata"]["name"] for o in l["items"]]
    q = lambda sel: P + "?labelSelector=" + sel
    check(names(s.req("GET", q("app%3Dpay"))[1]) == ["a", "b"], "labelSelector app=pay")
    check(names(s.req("GET", q("app!%3Dpay"))[1]) == ["c", "d"], "labelSelector app!=pay")
    check(names(s.req("GET", q("app+in+(pay,shop),!tier"))[1]) == ["a", "c"],
          "labelSelector in + !exists")
    check(names(s.req("GET", q("app+notin+(pay)"))[1]) == ["c", "d"], "labelSelector notin")
    check(names(s.req("GET", q("tier"))[1]) == ["b"], "labelSelector exists")
    st, l = s.req("GET", P + "?fieldSelector=spec.nodeName%3Dnode-1")
    check(names(l) == ["a", "c"], "fieldSelector spec.nodeName=node-1")
    st, l = s.req("GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-2,metadata.name!%3Db")
    check(names(l) == ["d"], "all-namespaces list with two field requirements")
    st, e = s.req("GET", P + "?fieldSelector=spec.bogus%3Dx")
    check(st == 400 and e["message"] == "field label not supported: spec.bogus",
          "unknown field selector: 400")
    st, l1 = s.req("GET", P + "?limit=3")
    cont = l1["metadata"].get("continue")
    check(names(l1) == ["a", "b", "c"] and cont and l1["metadata"]["remainingItemCount"] == 1,
          "limit=3: three items, a continue token, remainingItemCount 1")
    st, l2 = s.req("GET", P + "?limit=3&continue=" + cont)
    check(names(l2) == ["d"] and "continue" not in l2["metadata"], "continue: the rest")

    # Watch from a resourceVersion: every event after it, in order.
    rv0 = s.req("GET", P)[1]["metadata"]["resourceVersion"]
    s.req("POST", P, pod("w"))
    s.req("PATCH", P + "/w", {"metadata": {"labels": {"v": "2"}}}, "application/merge-patch+json")
    s.req("DELETE", P + "/w")
    evs = list(s.watch(P + "?watch=true&timeoutSeconds=1&resourceVersion=" + rv0))
    got = [(e["type"], e["object"]["metadata"]["name"]) for e in evs]
    check(got == [("ADDED", "w"), ("MODIFIED", "w"), ("DELETED", "w")],
          "watch from RV: ADDED, MODIFIED, DELETED in order (%s)" % got)
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in evs]
    check(rvs == sorted(rvs) and rvs[0] > int(rv0), "watch events carry increasing RVs")

    # timeoutSeconds: the server ends the stream.
    t0 = time.time()
    evs = list(s.watch(P + "?watch=true&timeoutSeconds=1"))
    check(0.8 < time.time() - t0 < 3 and [e["type"] for e in evs] == ["ADDED"] * 4,
          "watch without RV: synthetic ADDED for the 4 pods, closed after timeoutSeconds=1")

    # Bookmarks with allowWatchBookmarks.
    evs = list(s.watch(P + "?watch=true&timeoutSeconds=1&allowWatchBookmarks=true"
                       "&resourceVersion=" + s.req("GET", P)[1]["metadata"]["resourceVersion"]))
    bms = [e for e in evs if e["type"] == "BOOKMARK"]
    check(bms and all(set(b["object"]) == {"kind", "apiVersion", "metadata"} and
                      list(b["object"]["metadata"]) == ["resourceVersion"] for b in bms),
          "bookmarks arrive and carry only metadata.resourceVersion (%d)" % len(bms))

    # A watch from a resourceVersion older than the history (5 events): 410.
    for i in range(7):
        s.req("POST", "/api/v1/namespaces/default/configmaps", cm("h%d" % i))
    evs = list(s.watch(P + "?watch=true&timeoutSeconds=2&resourceVersion=" + rv0))
    check(len(evs) == 1 and evs[0]["type"] == "ERROR" and evs[0]["object"]["code"] == 410 and
          evs[0]["object"]["reason"] == "Expired" and
          evs[0]["object"]["message"].startswith("too old resource version: %s (" % rv0),
          "watch from an expired RV: ERROR 410 Expired (%s)" % evs[:1])

    # A selector watch: a relabelled object leaves as DELETED, comes back as ADDED.
    C = "/api/v1/namespaces/default/configmaps"
    s.req("POST", C, cm("sel", {"team": "a"}))
    rv = s.req("GET", C)[1]["metadata"]["resourceVersion"]
    s.req("PATCH", C + "/sel", {"data": {"k": "v"}}, "application/merge-patch+json")
    s.req("PATCH", C + "/sel", {"metadata": {"labels": {"team": "b"}}},
          "application/merge-patch+json")
    s.req("PATCH", C + "/sel", {"data": {"k": "w"}}, "application/merge-patch+json")
    s.req("PATCH", C + "/sel", {"metadata": {"labels": {"team": "a"}}},
          "application/merge-patch+json")
    evs = list(s.watch(C + "?watch=true&timeoutSeconds=1&labelSelector=team%3Da"
                       "&resourceVersion=" + rv))
    got = [(e["type"], e["object"]["metadata"]["labels"]["team"]) for e in evs]
    check(got == [("MODIFIED", "a"), ("DELETED", "b"), ("ADDED", "a")],
          "selector watch: MODIFIED, DELETED when relabelled, ADDED when back (%s)" % got)

    # Leases: create, update, conflict on a stale resourceVersion.
    L = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": "traceprof-controller"},
             "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}}
    st, l1 = s.req("POST", L, lease)
    check(st == 201, "lease created")
    l1["spec"]["holderIdentity"] = "b"
    st, l2 = s.req("PUT", L + "/traceprof-controller", l1)
    check(st == 200 and l2["spec"]["holderIdentity"] == "b", "lease renewed by PUT")
    l1["spec"]["holderIdentity"] = "c"
    st, e = s.req("PUT", L + "/traceprof-controller", l1)
    check(st == 409 and e["reason"] == "Conflict" and
          e["message"].startswith('Operation cannot be fulfilled on leases.coordination.k8s.io '
                                  '"traceprof-controller"'), "lease: stale PUT loses (409)")

    # Events, core and events.k8s.io.
    st, ev = s.req("POST", "/api/v1/namespaces/default/events", {
        "apiVersion": "v1", "kind": "Event", "metadata": {"generateName": "a."},
        "involvedObject": {"kind": "Pod", "name": "a", "namespace": "default"},
        "reason": "Started", "message": "m", "type": "Normal"})
    check(st == 201 and ev["metadata"]["name"].startswith("a.") and
          len(ev["metadata"]["name"]) == 7, "core event with generateName")
    st, l = s.req("GET", "/api/v1/namespaces/default/events?fieldSelector="
                  "involvedObject.name%3Da")
    check(len(l["items"]) == 1, "events by involvedObject.name")
    st, ev = s.req("POST", "/apis/events.k8s.io/v1/namespaces/default/events", {
        "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e1"},
        "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "traceprof.dev/c",
        "reportingInstance": "c-1", "action": "Reconcile", "reason": "Active",
        "regarding": {"kind": "TraceProfileTrigger", "name": "t"}, "type": "Normal"})
    check(st == 201, "events.k8s.io/v1 event created")

    # Finalizers: DELETE sets deletionTimestamp; removing the finalizer deletes.
    st, f = s.req("POST", C, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "fin", "finalizers": ["traceprof.dev/cleanup"]}})
    st, f = s.req("DELETE", C + "/fin")
    check(st == 200 and f["metadata"].get("deletionTimestamp"),
          "DELETE with a finalizer sets deletionTimestamp")
    s.req("PATCH", C + "/fin", {"metadata": {"finalizers": None}},
          "application/merge-patch+json")
    check(s.req("GET", C + "/fin")[0] == 404, "removing the finalizer deletes the object")

    # CRDs: a rule outside the CEL subset refuses the CRD; a CRD's resources
    # are served at once and go away with it.
    def crd(rule):
        return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": "widgets.example.dev"},
                "spec": {"group": "example.dev", "scope": "Namespaced",
                         "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                         "versions": [{"name": "v1", "served": True, "storage": True,
                                       "schema": {"openAPIV3Schema": {
                                           "type": "object", "properties": {"spec": {
                                               "type": "object",
                                               "x-kubernetes-validations": [{"rule": rule}],
                                               "properties": {"n": {"type": "integer"}}}}}}}]}}
    D = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    st, e = s.req("POST", D, crd("self.n.exists(x, x > 1)"))
    check(st == 422 and "compilation failed" in e["message"] and
          "x-kubernetes-validations[0].rule" in e["message"],
          "a CEL rule outside the subset refuses the CRD: %s" % e.get("message"))
    check(s.req("GET", "/apis/example.dev/v1")[0] == 404, "refused CRD not served")
    st, _ = s.req("POST", D, crd("self.n < 10"))
    st2, w = s.req("POST", "/apis/example.dev/v1/namespaces/default/widgets", {
        "apiVersion": "example.dev/v1", "kind": "Widget", "metadata": {"name": "w"},
        "spec": {"n": 12}})
    check(st == 201 and st2 == 422 and w["details"]["causes"][0]["field"] == "spec",
          "CRD served at once; its rule refuses n=12")
    st, _ = s.req("DELETE", D + "/widgets.example.dev")
    check(st == 200 and s.req("GET", "/apis/example.dev/v1")[0] == 404,
          "deleting the CRD stops serving it")

    # Unsupported patch type, bad JSON, missing namespace, no credentials.
    st, e = s.req("PATCH", C + "/sel", {}, "application/apply-patch+yaml")
    check(st == 415 and "accepted media types" in e["message"], "apply patch: 415")
    st, e = s.req("POST", "/api/v1/namespaces/nope/configmaps", cm("x"))
    check(st == 404 and e["message"] == 'namespaces "nope" not found', "unknown namespace: 404")
    c = s.conn()
    c.request("GET", "/api/v1/namespaces")
    r = c.getresponse()
    body = json.loads(r.read())
    check(r.status == 401 and body["kind"] == "Status", "no credentials: 401 Status")


if __name__ == "__main__":
    main()
