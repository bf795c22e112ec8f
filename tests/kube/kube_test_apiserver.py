#!/usr/bin/python3
"""kube_test_apiserver.py - a stand-in for kube-apiserver used by traceprof's
tests; not shipped.

It follows the Kubernetes API conventions closely enough for the real kubectl
and for traceprof's controller: HTTPS on 127.0.0.1 with a private CA, bearer
tokens and client certificates, legacy discovery, OpenAPI v3 built from CRD
schemas, generic storage with resourceVersion/generation/uid semantics, the
status subresource, merge/JSON/strategic patches, label and field selectors,
limit/continue, watch with history, 410 Expired and bookmarks, server-side
Table output, and CustomResourceDefinitions with structural schema
validation, defaulting, pruning, strict field validation and a small CEL
subset for x-kubernetes-validations.

Python 3.11 standard library only. Sections, in order: utilities, CEL subset,
schema validation, resource registry and discovery, store and watch history,
tables, HTTP/TLS handler, main. See tests/kube/README.md for what it does not
do and where it differs from the real server.
"""

import argparse
import base64
import copy
import datetime
import hashlib
import json
import os
import re
import secrets
import random
import signal
import socket
import socketserver
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import http.server
import urllib.parse

# ---------------------------------------------------------------- utilities


def now_rfc3339():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(s):
    try:
        return datetime.datetime.strptime(s, "%Y-%m-%dT%H:%M:%SZ").replace(
            tzinfo=datetime.timezone.utc)
    except (TypeError, ValueError):
        return None


def human_duration(seconds):
    """The age format of kubectl (apimachinery's HumanDuration)."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return "%ds" % s
    m = s // 60
    if m < 10:
        return "%dm%ds" % (m, s % 60) if s % 60 else "%dm" % m
    if m < 180:
        return "%dm" % m
    h = m // 60
    if h < 8:
        return "%dh%dm" % (h, m % 60) if m % 60 else "%dh" % h
    if h < 48:
        return "%dh" % h
    if h < 24 * 8:
        return "%dd%dh" % (h // 24, h % 24) if h % 24 else "%dd" % (h // 24)
    if h < 24 * 365 * 2:
        return "%dd" % (h // 24)
    return "%dy" % (h // 24 // 365)


def write_atomic(path, data):
    d = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-")
    with os.fdopen(fd, "w") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class ApiError(Exception):
    """An error answered as a metav1.Status."""

    def __init__(self, code, reason, message, details=None):
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details

    def status(self):
        st = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
              "message": self.message, "reason": self.reason, "code": self.code}
        if self.details:
            st["details"] = self.details
        return st


def qualified(rd):
    return rd.plural + ("." + rd.group if rd.group else "")


def not_found(rd, name):
    return ApiError(404, "NotFound", '%s "%s" not found' % (qualified(rd), name),
                    {"name": name, "group": rd.group, "kind": rd.plural})


def conflict(rd, name):
    return ApiError(409, "Conflict", 'Operation cannot be fulfilled on %s "%s": the object has '
                    'been modified; please apply your changes to the latest version and try '
                    'again' % (qualified(rd), name),
                    {"name": name, "group": rd.group, "kind": rd.plural})


def bad_request(msg):
    return ApiError(400, "BadRequest", msg)


class DupDict(dict):
    """A JSON object that remembers the keys it saw twice."""
    dups = ()


def _pairs(pairs):
    d = DupDict()
    dups = []
    for k, v in pairs:
        if k in d:
            dups.append(k)
        d[k] = v
    if dups:
        d.dups = dups
    return d


def decode_json(body):
    try:
        return json.loads(body.decode("utf-8") if body else "null", object_pairs_hook=_pairs)
    except (ValueError, UnicodeDecodeError) as e:
        raise bad_request("the request body is not valid JSON: %s" % e)


def find_dups(v, path=""):
    out = []
    if isinstance(v, dict):
        out += ['duplicate field "%s"' % (path + k) for k in getattr(v, "dups", ())]
        for k, x in v.items():
            out += find_dups(x, path + k + ".")
    elif isinstance(v, list):
        for i, x in enumerate(v):
            out += find_dups(x, path[:-1] + "[%d]." % i if path else "[%d]." % i)
    return out


def plain(v):
    """Deep copy into plain dicts (drops DupDict)."""
    return json.loads(json.dumps(v))


_DUR_RE = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|\u00b5s|\u03bcs|ms|s|m|h)")
_DUR_UNIT = {"ns": 1, "us": 1000, "\u00b5s": 1000, "\u03bcs": 1000, "ms": 10**6, "s": 10**9,
             "m": 60 * 10**9, "h": 3600 * 10**9}


def parse_go_duration(s):
    """Go's time.ParseDuration: returns nanoseconds or raises ValueError."""
    if not isinstance(s, str) or not s:
        raise ValueError("invalid duration %r" % s)
    orig, sign = s, 1
    if s[0] in "+-":
        sign, s = (-1 if s[0] == "-" else 1), s[1:]
    if s == "0":
        return 0
    total, pos = 0, 0
    while pos < len(s):
        m = _DUR_RE.match(s, pos)
        if not m or m.group(1) in ("", "."):
            raise ValueError('time: invalid duration "%s"' % orig)
        total += float(m.group(1)) * _DUR_UNIT[m.group(2)]
        pos = m.end()
    if not s:
        raise ValueError('time: invalid duration "%s"' % orig)
    return sign * int(total)


# ---------------------------------------------------------------- CEL subset
# Supported: literals (int, double, string, bool, null, lists), `self` and
# field access, `has(x.f)`, `size(x)` / `x.size()`, `duration(s)`,
# `x.matches(re)`, `x.startsWith/endsWith/contains(s)`, `int(x)`, `string(x)`,
# unary `!` `-`, `* / %`, `+ -`, `< <= > >= == !=`, `in`, `&&`, `||`, `?:`.
# Anything else is a compilation error, so a CRD using it is refused.


class CelError(Exception):
    pass


class Duration:
    def __init__(self, ns):
        self.ns = ns

    def __eq__(self, o):
        return isinstance(o, Duration) and o.ns == self.ns

    def __lt__(self, o):
        return self.ns < _dur(o).ns

    def __le__(self, o):
        return self.ns <= _dur(o).ns

    def __gt__(self, o):
        return self.ns > _dur(o).ns

    def __ge__(self, o):
        return self.ns >= _dur(o).ns

    def __add__(self, o):
        return Duration(self.ns + _dur(o).ns)

    def __sub__(self, o):
        return Duration(self.ns - _dur(o).ns)


def _dur(o):
    if not isinstance(o, Duration):
        raise CelError("no such overload: duration compared with %s" % type(o).__name__)
    return o


_CEL_TOKEN = re.compile(r"""\s*(?:(?P<num>\d+\.\d+|\d+)(?P<u>u)?|(?P<str>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
    |(?P<id>[A-Za-z_][A-Za-z0-9_]*)|(?P<op>&&|\|\||==|!=|<=|>=|[<>!+\-*/%().,\[\]?:]))""", re.X)
_CEL_FUNCS = {"has", "size", "duration", "int", "string", "double"}
_CEL_METHODS = {"matches", "size", "startsWith", "endsWith", "contains"}


def cel_tokens(src):
    out, pos = [], 0
    src = src.rstrip()
    while pos < len(src):
        m = _CEL_TOKEN.match(src, pos)
        if not m or m.end() == pos:
            raise CelError("unexpected character %r at %d" % (src[pos:pos + 1], pos))
        pos = m.end()
        if m.group("num"):
            n = m.group("num")
            out.append(("lit", float(n) if "." in n else int(n)))
        elif m.group("str"):
            s = m.group("str")[1:-1]
            out.append(("lit", re.sub(r"\\(.)", lambda x: {"n": "\n", "t": "\t"}.get(
                x.group(1), x.group(1)), s)))
        elif m.group("id"):
            i = m.group("id")
            out.append(("lit", {"true": True, "false": False, "null": None}[i])
                       if i in ("true", "false", "null") else ("id", i))
        else:
            out.append(("op", m.group("op")))
    out.append(("end", None))
    return out


class CelParser:
    """Recursive descent; produces a tree of tuples evaluated by cel_eval."""

    def __init__(self, src):
        self.t, self.i = cel_tokens(src), 0

    def peek(self, v=None):
        k, x = self.t[self.i]
        return (k == "op" and x == v) if v else (k, x)

    def take(self, v):
        if not self.peek(v):
            raise CelError("expected %r at token %d" % (v, self.i))
        self.i += 1

    def parse(self):
        e = self.cond()
        if self.t[self.i][0] != "end":
            raise CelError("unexpected %r" % (self.t[self.i][1],))
        return e

    def cond(self):
        c = self.binary(0)
        if self.peek("?"):
            self.i += 1
            a = self.cond()
            self.take(":")
            return ("?", c, a, self.cond())
        return c

    LEVELS = [["||"], ["&&"], ["==", "!=", "<", "<=", ">", ">=", "in"], ["+", "-"],
              ["*", "/", "%"]]

    def binary(self, lvl):
        if lvl == len(self.LEVELS):
            return self.unary()
        e = self.binary(lvl + 1)
        while True:
            k, x = self.peek()
            if (k == "op" or (k == "id" and x == "in")) and x in self.LEVELS[lvl]:
                self.i += 1
                e = ("bin", x, e, self.binary(lvl + 1))
            else:
                return e

    def unary(self):
        if self.peek("!"):
            self.i += 1
            return ("not", self.unary())
        if self.peek("-"):
            self.i += 1
            return ("neg", self.unary())
        return self.postfix(self.primary())

    def args(self):
        self.take("(")
        out = []
        while not self.peek(")"):
            out.append(self.cond())
            if not self.peek(")"):
                self.take(",")
        self.take(")")
        return out

    def primary(self):
        k, x = self.peek()
        self.i += 1
        if k == "lit":
            return ("lit", x)
        if k == "op" and x == "(":
            e = self.cond()
            self.take(")")
            return e
        if k == "op" and x == "[":
            items = []
            while not self.peek("]"):
                items.append(self.cond())
                if not self.peek("]"):
                    self.take(",")
            self.take("]")
            return ("list", items)
        if k == "id" and x == "self":
            return ("self",)
        if k == "id" and x in _CEL_FUNCS and self.peek("("):
            a = self.args()
            if x == "has":
                if len(a) != 1 or a[0][0] != "field":
                    raise CelError("has() needs a field selection such as has(self.f)")
                return ("has", a[0])
            if len(a) != 1:
                raise CelError("%s() takes one argument" % x)
            return ("call", x, a[0])
        raise CelError("unsupported expression at %r (this test server implements a CEL "
                       "subset: see tests/kube/README.md)" % (x,))

    def postfix(self, e):
        while True:
            if self.peek("."):
                self.i += 1
                k, name = self.peek()
                if k != "id":
                    raise CelError("expected a field name after '.'")
                self.i += 1
                if self.peek("("):
                    if name not in _CEL_METHODS:
                        raise CelError("unsupported function %s() (CEL subset)" % name)
                    e = ("method", name, e, self.args())
                else:
                    e = ("field", e, name)
            elif self.peek("["):
                self.i += 1
                idx = self.cond()
                self.take("]")
                e = ("index", e, idx)
            else:
                return e


def cel_compile(src):
    tree = CelParser(src).parse()
    return tree


def cel_eval(e, self_val):
    op = e[0]
    if op == "lit":
        return e[1]
    if op == "self":
        return self_val
    if op == "list":
        return [cel_eval(x, self_val) for x in e[1]]
    if op == "field":
        base = cel_eval(e[1], self_val)
        if not isinstance(base, dict) or e[2] not in base:
            raise CelError("no such key: %s" % e[2])
        return base[e[2]]
    if op == "has":
        base = cel_eval(e[1][1], self_val)
        return isinstance(base, dict) and e[1][2] in base
    if op == "index":
        base, idx = cel_eval(e[1], self_val), cel_eval(e[2], self_val)
        try:
            return base[idx]
        except (KeyError, IndexError, TypeError):
            raise CelError("no such key: %r" % (idx,))
    if op == "not":
        v = cel_eval(e[1], self_val)
        if not isinstance(v, bool):
            raise CelError("no such overload: !%s" % type(v).__name__)
        return not v
    if op == "neg":
        return -cel_eval(e[1], self_val)
    if op == "?":
        return cel_eval(e[2] if cel_eval(e[1], self_val) else e[3], self_val)
    if op == "call":
        v = cel_eval(e[2], self_val)
        if e[1] == "size":
            return len(v)
        if e[1] == "duration":
            try:
                return Duration(parse_go_duration(v))
            except ValueError as x:
                raise CelError(str(x))
        if e[1] == "int":
            return int(v)
        if e[1] == "double":
            return float(v)
        return str(v)
    if op == "method":
        base = cel_eval(e[2], self_val)
        args = [cel_eval(a, self_val) for a in e[3]]
        if e[1] == "size":
            return len(base)
        if not isinstance(base, str) or len(args) != 1 or not isinstance(args[0], str):
            raise CelError("no such overload: %s" % e[1])
        if e[1] == "matches":
            return re.search(args[0], base) is not None
        return {"startsWith": base.startswith, "endsWith": base.endswith,
                "contains": base.__contains__}[e[1]](args[0])
    if op == "bin":
        o = e[1]
        if o in ("&&", "||"):
            a = cel_eval(e[2], self_val)
            if o == "&&" and a is False:
                return False
            if o == "||" and a is True:
                return True
            b = cel_eval(e[3], self_val)
            if not isinstance(a, bool) or not isinstance(b, bool):
                raise CelError("no such overload: %s on non-bool" % o)
            return b
        a, b = cel_eval(e[2], self_val), cel_eval(e[3], self_val)
        try:
            if o == "==":
                return a == b
            if o == "!=":
                return a != b
            if o == "in":
                return a in b
            if o in ("<", "<=", ">", ">="):
                if type(a) is not type(b) and not (isinstance(a, (int, float)) and
                                                   isinstance(b, (int, float))):
                    raise CelError("no such overload: %s %s %s" % (
                        type(a).__name__, o, type(b).__name__))
                return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[o]
            if o == "+":
                return a + b
            if o == "-":
                return a - b
            if o == "*":
                return a * b
            if o == "/":
                return a // b if isinstance(a, int) and isinstance(b, int) else a / b
            if o == "%":
                return a % b
        except (TypeError, ZeroDivisionError) as x:
            raise CelError(str(x))
    raise CelError("cannot evaluate %r" % (op,))


# ---------------------------------------------------------- schema validation

TYPE_NAMES = {dict: "object", list: "array", str: "string", bool: "boolean"}


def json_type(v):
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    return TYPE_NAMES.get(type(v), type(v).__name__)


def show(v):
    return json.dumps(v, ensure_ascii=False) if isinstance(v, str) else (
        json.dumps(v) if not isinstance(v, (dict, list)) else '"%s"' % json_type(v))


def cause(reason, field, msg):
    return {"reason": reason, "message": msg, "field": field}


def invalid(field, value, detail):
    return cause("FieldValueInvalid", field, "Invalid value: %s: %s" % (show(value), detail))


def prune(v, sch, path, unknown):
    """Drops fields the schema does not declare; records their paths."""
    if sch is None or sch.get("x-kubernetes-preserve-unknown-fields"):
        if isinstance(v, dict) and sch and "properties" in sch:
            for k, x in v.items():
                if k in sch["properties"]:
                    prune(x, sch["properties"][k], path + "." + k, unknown)
        return
    if isinstance(v, dict):
        props, addl = sch.get("properties"), sch.get("additionalProperties")
        for k in list(v):
            if props is not None and k in props:
                prune(v[k], props[k], path + "." + k, unknown)
            elif isinstance(addl, dict):
                prune(v[k], addl, path + "." + k, unknown)
            elif addl is True or (props is None and addl is None and
                                  sch.get("type") != "object"):
                continue
            else:
                unknown.append((path + "." + k).lstrip("."))
                del v[k]
    elif isinstance(v, list) and isinstance(sch.get("items"), dict):
        for i, x in enumerate(v):
            prune(x, sch["items"], "%s[%d]" % (path, i), unknown)


def apply_defaults(v, sch):
    if not isinstance(sch, dict):
        return
    if isinstance(v, dict):
        for k, ps in (sch.get("properties") or {}).items():
            if k not in v and "default" in ps:
                v[k] = copy.deepcopy(ps["default"])
            if k in v:
                apply_defaults(v[k], ps)
        addl = sch.get("additionalProperties")
        if isinstance(addl, dict):
            for k, x in v.items():
                if k not in (sch.get("properties") or {}):
                    apply_defaults(x, addl)
    elif isinstance(v, list) and isinstance(sch.get("items"), dict):
        for x in v:
            apply_defaults(x, sch["items"])


FORMATS = {
    "date-time": lambda s: re.fullmatch(
        r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})", s),
    "duration": lambda s: _is_duration(s),
    "int-or-string": lambda s: True,
}


def _is_duration(s):
    try:
        parse_go_duration(s)
        return True
    except ValueError:
        return False


def validate(v, sch, path, causes):
    """Structural OpenAPI v3 validation with the messages of kube-apiserver."""
    if not isinstance(sch, dict):
        return
    if v is None:
        if not sch.get("nullable"):
            causes.append(invalid(path, v, "%s in body must be of type %s: \"null\"" % (
                path, sch.get("type", "object"))))
        return
    t = sch.get("type")
    jt = json_type(v)
    if t and not (t == jt or (t == "number" and jt == "integer")) and \
            not sch.get("x-kubernetes-int-or-string"):
        causes.append(invalid(path, v, "%s in body must be of type %s: \"%s\"" % (path, t, jt)))
        return
    if "enum" in sch and v not in sch["enum"]:
        causes.append(cause("FieldValueNotSupported", path, "Unsupported value: %s: supported "
                            "values: %s" % (show(v), ", ".join(show(x) for x in sch["enum"]))))
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        if "maximum" in sch and v > sch["maximum"]:
            causes.append(invalid(path, v, "%s in body should be less than or equal to %s" % (
                path, sch["maximum"])))
        if "minimum" in sch and v < sch["minimum"]:
            causes.append(invalid(path, v, "%s in body should be greater than or equal to %s" % (
                path, sch["minimum"])))
    if isinstance(v, str):
        if "maxLength" in sch and len(v) > sch["maxLength"]:
            causes.append(cause("FieldValueTooLong", path, "Too long: may not be more than %d "
                                "bytes" % sch["maxLength"]))
        if "minLength" in sch and len(v) < sch["minLength"]:
            causes.append(invalid(path, v, "%s in body should be at least %d chars long" % (
                path, sch["minLength"])))
        if "pattern" in sch and not re.search(sch["pattern"], v):
            causes.append(invalid(path, v, "%s in body should match '%s'" % (path, sch["pattern"])))
        f = sch.get("format")
        if f in FORMATS and not FORMATS[f](v):
            causes.append(invalid(path, v, "%s in body must be of type %s: %s" % (
                path, f, show(v))))
    if isinstance(v, list):
        if "maxItems" in sch and len(v) > sch["maxItems"]:
            causes.append(cause("FieldValueTooMany", path, "Too many: %d: must have at most %d "
                                "items" % (len(v), sch["maxItems"])))
        if "minItems" in sch and len(v) < sch["minItems"]:
            causes.append(invalid(path, v, "%s in body should have at least %d items" % (
                path, sch["minItems"])))
        for i, x in enumerate(v):
            validate(x, sch.get("items"), "%s[%d]" % (path, i), causes)
        if sch.get("x-kubernetes-list-type") == "map":
            seen = set()
            for i, x in enumerate(v):
                key = tuple(str(x.get(k)) for k in sch.get("x-kubernetes-list-map-keys", [])) \
                    if isinstance(x, dict) else None
                if key in seen:
                    causes.append(cause("FieldValueDuplicate", "%s[%d]" % (path, i),
                                        "Duplicate value: %s" % json.dumps(dict(zip(
                                            sch["x-kubernetes-list-map-keys"], key)))))
                seen.add(key)
    if isinstance(v, dict):
        for r in sch.get("required", []):
            if r not in v:
                causes.append(cause("FieldValueRequired", (path + "." + r).lstrip("."),
                                    "Required value"))
        props = sch.get("properties") or {}
        for k, x in v.items():
            if k in props:
                validate(x, props[k], (path + "." + k).lstrip("."), causes)
            elif isinstance(sch.get("additionalProperties"), dict):
                validate(x, sch["additionalProperties"], (path + "." + k).lstrip("."), causes)
    for rule in sch.get("x-kubernetes-validations", []):
        try:
            ok = cel_eval(rule["_compiled"], v)
            if ok is not True:
                fp = path + rule.get("fieldPath", "")
                msg = rule.get("message") or "failed rule: %s" % rule["rule"]
                causes.append(cause("FieldValueInvalid", fp, "Invalid value: \"%s\": %s" % (
                    json_type(v), msg)))
        except CelError as x:
            causes.append(cause("FieldValueInvalid", path, "Invalid value: \"%s\": rule "
                                "evaluation error: %s: %s" % (json_type(v), rule["rule"], x)))


def compile_rules(sch, path, errors):
    """Compiles every x-kubernetes-validations rule in place (key _compiled)."""
    if not isinstance(sch, dict):
        return
    for i, rule in enumerate(sch.get("x-kubernetes-validations", [])):
        if "oldSelf" in rule.get("rule", ""):
            errors.append("%s.x-kubernetes-validations[%d].rule: Invalid value: %s: "
                          "compilation failed: oldSelf (transition rules) is not supported by "
                          "this test server" % (path, i, json.dumps(rule.get("rule"))))
            continue
        try:
            rule["_compiled"] = cel_compile(rule["rule"])
        except (CelError, KeyError, TypeError) as x:
            errors.append("%s.x-kubernetes-validations[%d].rule: Invalid value: %s: "
                          "compilation failed: %s" % (path, i, json.dumps(rule.get("rule")), x))
    for k, ps in (sch.get("properties") or {}).items():
        compile_rules(ps, "%s.properties[%s]" % (path, k), errors)
    for key in ("items", "additionalProperties"):
        if isinstance(sch.get(key), dict):
            compile_rules(sch[key], "%s.%s" % (path, key), errors)
    for key in ("pattern",):
        if key in sch:
            try:
                re.compile(sch[key])
            except re.error as x:
                errors.append("%s.pattern: Invalid value: %s: %s" % (
                    path, json.dumps(sch[key]), x))


# ------------------------------------------------ resource registry, discovery

VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
META_FIELDS = {"name", "generateName", "namespace", "uid", "resourceVersion", "generation",
               "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
               "labels", "annotations", "ownerReferences", "finalizers", "managedFields",
               "selfLink"}


class ResourceDef:
    def __init__(self, group, version, plural, singular, kind, namespaced, short=(),
                 categories=(), status=False, schema=None, columns=None, crd=None):
        self.group, self.version, self.plural, self.singular = group, version, plural, singular
        self.kind, self.namespaced, self.short, self.categories = kind, namespaced, short, categories
        self.status, self.schema, self.columns, self.crd = status, schema, columns, crd

    @property
    def gv(self):
        return self.group + "/" + self.version if self.group else self.version

    @property
    def key(self):
        return (self.group, self.plural)


def builtin_resources():
    R = ResourceDef
    return [
        R("", "v1", "namespaces", "namespace", "Namespace", False, ["ns"], status=True),
        R("", "v1", "pods", "pod", "Pod", True, ["po"], ["all"], status=True),
        R("", "v1", "events", "event", "Event", True, ["ev"]),
        R("", "v1", "services", "service", "Service", True, ["svc"], ["all"], status=True),
        R("", "v1", "configmaps", "configmap", "ConfigMap", True, ["cm"]),
        R("", "v1", "secrets", "secret", "Secret", True),
        R("", "v1", "serviceaccounts", "serviceaccount", "ServiceAccount", True, ["sa"]),
        R("", "v1", "nodes", "node", "Node", False, ["no"], status=True),
        R("apps", "v1", "deployments", "deployment", "Deployment", True, ["deploy"], ["all"],
          status=True),
        R("apps", "v1", "daemonsets", "daemonset", "DaemonSet", True, ["ds"], ["all"],
          status=True),
        R("rbac.authorization.k8s.io", "v1", "roles", "role", "Role", True),
        R("rbac.authorization.k8s.io", "v1", "rolebindings", "rolebinding", "RoleBinding", True),
        R("rbac.authorization.k8s.io", "v1", "clusterroles", "clusterrole", "ClusterRole", False),
        R("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "clusterrolebinding",
          "ClusterRoleBinding", False),
        R("coordination.k8s.io", "v1", "leases", "lease", "Lease", True),
        R("networking.k8s.io", "v1", "networkpolicies", "networkpolicy", "NetworkPolicy", True,
          ["netpol"]),
        R("batch", "v1", "jobs", "job", "Job", True, [], ["all"], status=True),
        R("events.k8s.io", "v1", "events", "event", "Event", True, ["ev"]),
        R("apiextensions.k8s.io", "v1", "customresourcedefinitions", "customresourcedefinition",
          "CustomResourceDefinition", False, ["crd", "crds"], ["api-extensions"], status=True),
    ]


def resource_from_crd(crd, errors):
    """A ResourceDef for the storage version of a CRD; appends problems to errors."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group, scope = spec.get("group", ""), spec.get("scope")
    name = crd["metadata"].get("name", "")
    if not names.get("plural") or not names.get("kind"):
        errors.append("spec.names.plural/kind: Required value")
    elif name != "%s.%s" % (names["plural"], group):
        errors.append('metadata.name: Invalid value: "%s": must be spec.names.plural+"."+'
                      'spec.group' % name)
    if scope not in ("Namespaced", "Cluster"):
        errors.append('spec.scope: Unsupported value: %s: supported values: "Cluster", '
                      '"Namespaced"' % json.dumps(scope))
    versions = spec.get("versions") or []
    storage = [v for v in versions if v.get("storage")]
    if len(storage) != 1:
        errors.append("spec.versions: Invalid value: must have exactly one version marked as "
                      "storage version")
    if errors:
        return None
    v = storage[0]
    sch = copy.deepcopy((v.get("schema") or {}).get("openAPIV3Schema"))
    if not isinstance(sch, dict):
        errors.append("spec.versions[0].schema.openAPIV3Schema: Required value: schemas are "
                      "required")
        return None
    compile_rules(sch, "spec.validation.openAPIV3Schema", errors)
    if errors:
        return None
    cols = v.get("additionalPrinterColumns")
    return ResourceDef(group, v["name"], names["plural"], names.get("singular") or
                       names["kind"].lower(), names["kind"], scope == "Namespaced",
                       names.get("shortNames") or [], names.get("categories") or [],
                       "status" in (v.get("subresources") or {}), sch, cols, name)


def api_resource(rd):
    r = {"name": rd.plural, "singularName": rd.singular, "namespaced": rd.namespaced,
         "kind": rd.kind, "verbs": VERBS}
    if rd.short:
        r["shortNames"] = list(rd.short)
    if rd.categories:
        r["categories"] = list(rd.categories)
    out = [r]
    if rd.status:
        out.append({"name": rd.plural + "/status", "singularName": "", "namespaced":
                    rd.namespaced, "kind": rd.kind, "verbs": ["get", "patch", "update"]})
    return out


OBJECT_META = {"type": "object", "description": "Standard object's metadata.",
               "properties": {k: {"type": t} for k, t in [
                   ("name", "string"), ("namespace", "string"), ("generateName", "string"),
                   ("uid", "string"), ("resourceVersion", "string"), ("generation", "integer"),
                   ("creationTimestamp", "string"), ("deletionTimestamp", "string"),
                   ("labels", "object"), ("annotations", "object"), ("finalizers", "array"),
                   ("ownerReferences", "array")]}}


def schema_name(rd):
    g = ".".join(reversed(rd.group.split("."))) if rd.group else "io.k8s.api.core"
    return "%s.%s.%s" % (g, rd.version, rd.kind)


def strip_private(s):
    if isinstance(s, dict):
        return {k: strip_private(v) for k, v in s.items() if k != "_compiled"}
    if isinstance(s, list):
        return [strip_private(x) for x in s]
    return s


def openapi_v3_doc(rds):
    """The OpenAPI v3 document of one group/version: schemas of the kinds and, per
    resource, a PATCH operation declaring fieldValidation (kubectl checks it)."""
    schemas = {"io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": OBJECT_META}
    paths = {}
    for rd in rds:
        gvk = [{"group": rd.group, "version": rd.version, "kind": rd.kind}]
        if rd.schema is not None:
            s = strip_private(rd.schema)
            s.setdefault("properties", {})
            s["properties"]["metadata"] = {"allOf": [{"$ref": "#/components/schemas/io.k8s."
                                                      "apimachinery.pkg.apis.meta.v1.ObjectMeta"}],
                                           "description": OBJECT_META["description"]}
            s["properties"].setdefault("apiVersion", {"type": "string", "description":
                                                      "APIVersion of this object."})
            s["properties"].setdefault("kind", {"type": "string", "description":
                                                "Kind of this object."})
        else:
            s = {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                 "description": "%s (minimal schema of the test server)" % rd.kind,
                 "properties": {"metadata": {"allOf": [{"$ref": "#/components/schemas/io.k8s."
                                                        "apimachinery.pkg.apis.meta.v1."
                                                        "ObjectMeta"}]}}}
        s["x-kubernetes-group-version-kind"] = gvk
        schemas[schema_name(rd)] = s
        base = "/apis/%s" % rd.gv if rd.group else "/api/v1"
        p = "%s%s/%s/{name}" % (base, "/namespaces/{namespace}" if rd.namespaced else "",
                                rd.plural)
        ref = {"schema": {"$ref": "#/components/schemas/" + schema_name(rd)}}
        paths[p] = {"patch": {
            "operationId": "patch" + rd.kind, "x-kubernetes-group-version-kind": gvk[0],
            "x-kubernetes-action": "patch",
            "parameters": [{"name": n, "in": "query", "schema": {"type": "string"}}
                           for n in ("dryRun", "fieldManager", "fieldValidation", "force")],
            "requestBody": {"content": {"application/json-patch+json": {"schema": {
                "type": "object"}}, "application/merge-patch+json": {"schema": {
                    "type": "object"}}}, "required": True},
            "responses": {"200": {"description": "OK", "content": {"application/json": ref}}}}}
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v1.32.0"},
            "paths": paths, "components": {"schemas": schemas}}


# ----------------------------------------------------- label/field selectors


def parse_label_selector(s):
    """Returns a list of (key, op, values); raises ApiError on bad syntax."""
    reqs, parts, depth, cur = [], [], 0, ""
    for ch in s or "":
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur)
    for p in parts:
        p = p.strip()
        m = re.fullmatch(r"([\w./-]+)\s+(in|notin)\s+\(([^)]*)\)", p)
        if m:
            reqs.append((m.group(1), m.group(2), {v.strip() for v in m.group(3).split(",")
                                                  if v.strip()}))
            continue
        m = re.fullmatch(r"([\w./-]+)\s*(==|!=|=)\s*([\w.-]*)", p)
        if m:
            reqs.append((m.group(1), "!=" if m.group(2) == "!=" else "=", {m.group(3)}))
            continue
        m = re.fullmatch(r"(!?)\s*([\w./-]+)", p)
        if m:
            reqs.append((m.group(2), "!exists" if m.group(1) else "exists", set()))
            continue
        raise bad_request("unable to parse requirement: %s" % p)
    return reqs


def labels_match(reqs, labels):
    labels = labels or {}
    for k, op, vals in reqs:
        has = k in labels
        if op == "exists" and not has or op == "!exists" and has:
            return False
        if op in ("=", "in") and (not has or labels[k] not in vals):
            return False
        if op in ("!=", "notin") and has and labels[k] in vals:
            return False
    return True


FIELD_PATHS = {"metadata.name": ("metadata", "name"), "metadata.namespace": ("metadata",
                                                                             "namespace")}
EXTRA_FIELDS = {("", "pods"): {"spec.nodeName": ("spec", "nodeName"),
                               "status.phase": ("status", "phase")},
                ("", "events"): {"involvedObject.name": ("involvedObject", "name"),
                                 "involvedObject.kind": ("involvedObject", "kind"),
                                 "involvedObject.uid": ("involvedObject", "uid"),
                                 "reason": ("reason",), "type": ("type",)},
                ("", "secrets"): {"type": ("type",)}}


def parse_field_selector(s, rd):
    known = dict(FIELD_PATHS, **EXTRA_FIELDS.get(rd.key, {}))
    out = []
    for p in (s or "").split(","):
        if not p.strip():
            continue
        m = re.fullmatch(r"\s*([\w.]+)\s*(==|!=|=)\s*(.*?)\s*", p)
        if not m:
            raise bad_request("invalid selector: '%s'; can't understand '%s'" % (s, p))
        if m.group(1) not in known:
            raise bad_request('field label not supported: %s' % m.group(1))
        out.append((known[m.group(1)], m.group(2) == "!=", m.group(3)))
    return out


def fields_match(reqs, obj):
    for path, neg, val in reqs:
        v = obj
        for k in path:
            v = v.get(k) if isinstance(v, dict) else None
        if ((v or "") == val) == neg:
            return False
    return True


# ------------------------------------------------------- store, watch history

NAME_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
LABEL_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


_MISSING = object()


def field_at(obj, path):
    """The value at a validation error's field path ("spec.a[0].b"), or _MISSING."""
    cur = obj
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", path or ""):
        if part.startswith("["):
            i = int(part[1:-1])
            cur = cur[i] if isinstance(cur, list) and i < len(cur) else _MISSING
        else:
            cur = cur.get(part, _MISSING) if isinstance(cur, dict) else _MISSING
        if cur is _MISSING:
            break
    return cur


class Store:
    """All objects in memory, persisted to store.json within 0.2 s of a
    mutation and at shutdown (SIGTERM, SIGINT); one
    global resourceVersion counter; a bounded history of watch events."""

    def __init__(self, path, history):
        self.path, self.history = path, history
        self.dirty = False    # changes not yet in store.json (flush())
        self.lock = threading.Condition(threading.RLock())
        self.objects = {}     # (group, plural) -> {(namespace, name): object}
        self.rv = 0           # last resourceVersion handed out
        self.events = []      # [(rv, key, type, object, old object)], at most history
        self.resources = {r.key: r for r in builtin_resources()}
        if os.path.exists(path):
            with open(path) as f:
                saved = json.load(f)
            self.rv = saved["resourceVersion"]
            for k, objs in saved["objects"].items():
                g, p = k.split("/", 1)
                self.objects[(g, p)] = {(o["metadata"].get("namespace", ""),
                                         o["metadata"]["name"]): o for o in objs}
            for crd in self.bucket(("apiextensions.k8s.io", "customresourcedefinitions")).values():
                rd = resource_from_crd(crd, [])
                if rd:
                    self.resources[rd.key] = rd
        self.floor = self.rv  # events up to floor are not in the history
        if not self.objects:
            with self.lock:
                self.seed()

    def seed(self):
        if True:
            for ns in ("default", "kube-system", "kube-public"):
                self.create(self.resources[("", "namespaces")], "", {
                    "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})

    def bucket(self, key):
        return self.objects.setdefault(key, {})

    def save(self):
        """Marks the store changed; flush() writes it. Writing the whole
        file on every mutation made a bulk apply of N objects cost O(N^2)."""
        self.dirty = True

    def flush(self):
        with self.lock:
            if not self.dirty:
                return
            out = json.dumps({"resourceVersion": self.rv, "objects": {
                "%s/%s" % k: list(v.values()) for k, v in self.objects.items() if v}})
            self.dirty = False
        write_atomic(self.path, out)

    def flusher(self, stopping, period=0.2):
        """Writes the changes of the last period, until stopping is set."""
        while not stopping.wait(period):
            self.flush()

    def emit(self, rd, typ, obj, old=None):
        self.events.append((self.rv, rd.key, typ, copy.deepcopy(obj), old))
        if len(self.events) > self.history:
            self.floor = self.events[0][0]
            del self.events[0]
        self.save()
        self.lock.notify_all()

    def next_rv(self):
        self.rv += 1
        return str(self.rv)

    # -- reads
    def get(self, rd, ns, name):
        o = self.bucket(rd.key).get((ns, name))
        if o is None:
            raise not_found(rd, name)
        return self.present(rd, o)

    def present(self, rd, o):
        o = copy.deepcopy(o)
        if rd.schema is not None:
            apply_defaults(o, rd.schema)
        return o

    def list(self, rd, ns):
        b = self.bucket(rd.key)
        return [self.present(rd, b[k]) for k in sorted(b) if not ns or k[0] == ns]

    # -- writes (callers hold self.lock)
    def check_body(self, rd, ns, body, name=None):
        if not isinstance(body, dict):
            raise bad_request("the body must be a JSON object")
        if body.get("apiVersion", rd.gv) != rd.gv or body.get("kind", rd.kind) != rd.kind:
            raise bad_request('the API version in the data (%s) does not match the expected API '
                              'version (%s)' % (body.get("apiVersion"), rd.gv)
                              if body.get("apiVersion", rd.gv) != rd.gv else
                              '%s in version "%s" cannot be handled as a %s: kind "%s" does not '
                              'match' % (rd.kind, rd.version, rd.kind, body.get("kind")))
        body["apiVersion"], body["kind"] = rd.gv, rd.kind
        meta = body.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise bad_request("metadata must be an object")
        if rd.namespaced:
            if meta.get("namespace", ns) != ns:
                raise bad_request("the namespace of the provided object does not match the "
                                  "namespace sent on the request")
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
        if name is not None and meta.get("name", name) != name:
            raise bad_request("the name of the object (%s) does not match the name on the URL "
                              "(%s)" % (meta.get("name"), name))
        if name is not None:
            meta["name"] = name

    def validate_object(self, rd, obj, strict, warnings, old=None):
        """Strict decoding, pruning, defaulting, schema and CEL for custom
        resources; name checks for all. Raises ApiError. With old (an
        update), errors of fields whose value did not change are dropped:
        CRD validation ratcheting, on by default since Kubernetes 1.30."""
        problems = find_dups(obj)
        if rd.schema is not None:
            unknown = []
            meta = obj.get("metadata", {})
            unknown += ["metadata." + k for k in list(meta) if k not in META_FIELDS]
            for k in unknown:
                meta.pop(k.split(".", 1)[1], None)
            full = dict(rd.schema)
            props = dict(full.get("properties") or {})
            for k in ("apiVersion", "kind", "metadata"):
                props[k] = {"x-kubernetes-preserve-unknown-fields": True}
            full["properties"] = props
            prune(obj, full, "", unknown)
            problems += ['unknown field "%s"' % u for u in unknown]
        if problems and strict:
            raise bad_request('%s in version "%s" cannot be handled as a %s: strict decoding '
                              'error: %s' % (rd.kind, rd.version, rd.kind, ", ".join(problems)))
        warnings += problems
        obj = plain(obj)
        causes = []
        name = obj["metadata"].get("name", "")
        pattern = LABEL_RE if rd.key == ("", "namespaces") else NAME_RE
        if not pattern.fullmatch(name) or len(name) > 253:
            causes.append(invalid("metadata.name", name, "a lowercase RFC 1123 subdomain must "
                                  "consist of lower case alphanumeric characters, '-' or '.', and "
                                  "must start and end with an alphanumeric character"))
        if rd.schema is not None:
            apply_defaults(obj, rd.schema)
            body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
            sch = dict(rd.schema)
            sch["properties"] = {k: v for k, v in (sch.get("properties") or {}).items()
                                 if k not in ("apiVersion", "kind", "metadata")}
            validate(body, sch, "", causes)
            if old is not None:
                causes = [c for c in causes
                          if field_at(obj, c["field"]) != field_at(old, c["field"])]
        if rd.key == ("apiextensions.k8s.io", "customresourcedefinitions"):
            errs = []
            crd_rd = resource_from_crd(obj, errs)
            for e in errs:
                f, _, m = e.partition(": ")
                causes.append(cause("FieldValueInvalid", f, m))
            for other in self.resources.values():
                if crd_rd and other.key == crd_rd.key and other.crd != name:
                    causes.append(cause("FieldValueInvalid", "spec.names.plural",
                                        "Invalid value: \"%s\": is already in use" % other.plural))
        if causes:
            raise ApiError(422, "Invalid", '%s.%s "%s" is invalid: %s' % (
                rd.kind, rd.group, name, causes[0]["field"] + ": " + causes[0]["message"]
                if len(causes) == 1 else "[" + ", ".join(c["field"] + ": " + c["message"]
                                                         for c in causes) + "]")
                if rd.group else '%s "%s" is invalid: %s' % (rd.kind, name, "; ".join(
                    c["field"] + ": " + c["message"] for c in causes)),
                {"name": name, "group": rd.group, "kind": rd.kind, "causes": causes})
        return obj

    def check_namespace(self, rd, ns):
        if rd.namespaced and ("", ns) not in self.bucket(("", "namespaces")):
            raise ApiError(404, "NotFound", 'namespaces "%s" not found' % ns,
                           {"name": ns, "kind": "namespaces"})

    def create(self, rd, ns, body, strict=False, warnings=None):
        warnings = [] if warnings is None else warnings
        self.check_body(rd, ns, body)
        meta = body["metadata"]
        if not meta.get("name"):
            if not meta.get("generateName"):
                raise ApiError(422, "Invalid", '%s "" is invalid: metadata.name: Required '
                               'value: name or generateName is required' % rd.kind,
                               {"kind": rd.kind, "causes": [cause("FieldValueRequired",
                                                                  "metadata.name", "Required value: name or generateName is required")]})
            meta["name"] = meta["generateName"] + "".join(
                secrets.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5))
        obj = self.validate_object(rd, body, strict, warnings)
        self.check_namespace(rd, ns)
        name = obj["metadata"]["name"]
        if (ns if rd.namespaced else "", name) in self.bucket(rd.key):
            raise ApiError(409, "AlreadyExists", '%s "%s" already exists' % (qualified(rd), name),
                           {"name": name, "group": rd.group, "kind": rd.plural})
        m = obj["metadata"]
        for k in ("uid", "resourceVersion", "generation", "creationTimestamp",
                  "deletionTimestamp"):
            m.pop(k, None)
        m["uid"] = str(uuid.uuid4())
        m["creationTimestamp"] = now_rfc3339()
        m["generation"] = 1
        if rd.status and rd.schema is not None:
            obj.pop("status", None)
        if rd.key == ("", "namespaces"):
            obj["status"] = {"phase": "Active"}
        if rd.key == ("", "pods"):
            obj["status"] = {"phase": "Pending"}
        if rd.key == ("apiextensions.k8s.io", "customresourcedefinitions"):
            self.establish(obj)
        m["resourceVersion"] = self.next_rv()
        self.bucket(rd.key)[(ns if rd.namespaced else "", name)] = obj
        self.emit(rd, "ADDED", obj)
        return self.present(rd, obj)

    def establish(self, crd):
        t = now_rfc3339()
        crd_rd = resource_from_crd(crd, [])
        crd["status"] = {
            "acceptedNames": crd["spec"]["names"],
            "storedVersions": [crd_rd.version],
            "conditions": [
                {"type": "NamesAccepted", "status": "True", "lastTransitionTime": t,
                 "reason": "NoConflicts", "message": "no conflicts found"},
                {"type": "Established", "status": "True", "lastTransitionTime": t,
                 "reason": "InitialNamesAccepted",
                 "message": "the initial names have been accepted"}]}
        self.resources[crd_rd.key] = crd_rd

    def update(self, rd, ns, name, body, sub=None, strict=False, warnings=None, check_rv=True):
        """PUT semantics; also the last step of PATCH."""
        warnings = [] if warnings is None else warnings
        key = (ns if rd.namespaced else "", name)
        old = self.bucket(rd.key).get(key)
        if old is None:
            raise not_found(rd, name)
        self.check_body(rd, ns, body, name)
        rv = body["metadata"].get("resourceVersion")
        if check_rv and rv and rv != old["metadata"]["resourceVersion"]:
            raise conflict(rd, name)
        if sub == "status":
            new = copy.deepcopy(old)
            if "status" in body:
                new["status"] = body["status"]
            else:
                new.pop("status", None)
            new = self.validate_object(rd, new, strict, warnings, old)
        else:
            new = self.validate_object(rd, body, strict, warnings, old)
            if rd.status:
                if "status" in old:
                    new["status"] = old["status"]
                else:
                    new.pop("status", None)
        m, om = new["metadata"], old["metadata"]
        for k in ("uid", "creationTimestamp", "generation", "deletionTimestamp", "namespace"):
            if k in om:
                m[k] = om[k]
            else:
                m.pop(k, None)
        if om.get("deletionTimestamp") and set(m.get("finalizers") or []) - set(
                om.get("finalizers") or []):
            raise ApiError(422, "Invalid", "%s \"%s\" is invalid: metadata.finalizers: Forbidden: "
                           "no new finalizers can be added if the object is being deleted" % (
                               rd.kind, name), {"name": name, "kind": rd.kind})
        m["resourceVersion"] = om["resourceVersion"]
        if new == old:
            return self.present(rd, new)
        skip = ("metadata", "status") if rd.status else ("metadata",)
        if {k: v for k, v in new.items() if k not in skip} != \
                {k: v for k, v in old.items() if k not in skip}:
            m["generation"] = om.get("generation", 1) + 1
        if rd.key == ("apiextensions.k8s.io", "customresourcedefinitions") and sub != "status":
            new["status"] = old.get("status")
            self.establish(new)
        m["resourceVersion"] = self.next_rv()
        if m.get("deletionTimestamp") and not m.get("finalizers"):
            del self.bucket(rd.key)[key]
            self.emit(rd, "DELETED", new, old)
            self.after_delete(rd, new)
            return self.present(rd, new)
        self.bucket(rd.key)[key] = new
        self.emit(rd, "MODIFIED", new, old)
        return self.present(rd, new)

    def delete(self, rd, ns, name, precondition_rv=None):
        key = (ns if rd.namespaced else "", name)
        old = self.bucket(rd.key).get(key)
        if old is None:
            raise not_found(rd, name)
        if precondition_rv and precondition_rv != old["metadata"]["resourceVersion"]:
            raise conflict(rd, name)
        if old["metadata"].get("finalizers"):
            if old["metadata"].get("deletionTimestamp"):
                return self.present(rd, old)
            new = copy.deepcopy(old)
            new["metadata"]["deletionTimestamp"] = now_rfc3339()
            new["metadata"]["deletionGracePeriodSeconds"] = 0
            new["metadata"]["resourceVersion"] = self.next_rv()
            self.bucket(rd.key)[key] = new
            self.emit(rd, "MODIFIED", new, old)
            return self.present(rd, new)
        gone = copy.deepcopy(old)
        gone["metadata"]["resourceVersion"] = self.next_rv()
        del self.bucket(rd.key)[key]
        self.emit(rd, "DELETED", gone, old)
        self.after_delete(rd, gone)
        return self.present(rd, gone)

    def after_delete(self, rd, obj):
        """Cascades: a CRD takes its resources and objects, a namespace its objects."""
        if rd.key == ("apiextensions.k8s.io", "customresourcedefinitions"):
            crd_rd = next((r for r in self.resources.values()
                           if r.crd == obj["metadata"]["name"]), None)
            if crd_rd:
                for (cns, cname), o in list(self.bucket(crd_rd.key).items()):
                    o["metadata"]["finalizers"] = []
                    self.delete(crd_rd, cns, cname)
                del self.resources[crd_rd.key]
        if rd.key == ("", "namespaces"):
            for r in list(self.resources.values()):
                if r.namespaced:
                    for (cns, cname), o in list(self.bucket(r.key).items()):
                        if cns == obj["metadata"]["name"]:
                            o["metadata"]["finalizers"] = []
                            self.delete(r, cns, cname)


# -------------------------------------------------------------------- patches


def merge_patch(target, patch):
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if not isinstance(target, dict):
        target = {}
    out = dict(target)
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def strategic_patch(target, patch):
    """Strategic merge patch, approximated: a merge patch where lists are
    replaced; directives ($patch, $retainKeys, $setElementOrder/...,
    $deleteFromPrimitiveList/...) are honoured loosely or dropped."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: v for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if k.startswith("$setElementOrder/") or k in ("$retainKeys", "$patch"):
            continue
        if k.startswith("$deleteFromPrimitiveList/"):
            f = k.split("/", 1)[1]
            if isinstance(out.get(f), list):
                out[f] = [x for x in out[f] if x not in v]
            continue
        if v is None:
            out.pop(k, None)
        else:
            r = strategic_patch(out.get(k), v)
            if r is None:
                out.pop(k, None)
            else:
                out[k] = r
    return out


def _pointer(doc, path):
    parts = [p.replace("~1", "/").replace("~0", "~") for p in path.split("/")[1:]]
    if not path.startswith("/") and path:
        raise ValueError("invalid JSON pointer %s" % path)
    parent = doc
    for p in parts[:-1]:
        parent = parent[int(p)] if isinstance(parent, list) else parent[p]
    return parent, parts[-1] if parts else None


def json_patch(doc, ops):
    """RFC 6902 JSON patch."""
    doc = copy.deepcopy(doc)
    if not isinstance(ops, list):
        raise bad_request("the JSON patch must be a list of operations")
    for op in ops:
        try:
            o, path = op["op"], op["path"]
            parent, last = _pointer(doc, path)
            if o in ("add", "replace", "test"):
                val = copy.deepcopy(op["value"])
            if o in ("move", "copy"):
                sp, sl = _pointer(doc, op["from"])
                val = copy.deepcopy(sp[int(sl)] if isinstance(sp, list) else sp[sl])
                if o == "move":
                    if isinstance(sp, list):
                        del sp[int(sl)]
                    else:
                        del sp[sl]
                o = "add"
            if o == "test":
                cur = parent[int(last)] if isinstance(parent, list) else parent[last]
                if cur != val:
                    raise ApiError(422, "Invalid", "the test operation failed at %s" % path)
            elif o == "remove":
                if isinstance(parent, list):
                    del parent[int(last)]
                else:
                    del parent[last]
            elif o == "add" and isinstance(parent, list):
                parent.insert(len(parent) if last == "-" else int(last), val)
            elif o in ("add", "replace"):
                if isinstance(parent, list):
                    parent[int(last)] = val
                else:
                    if o == "replace" and last not in parent:
                        raise KeyError(last)
                    parent[last] = val
            else:
                raise bad_request("unknown JSON patch operation %r" % o)
        except (KeyError, IndexError, ValueError, TypeError) as x:
            raise ApiError(422, "Invalid", "the server rejected our request due to an error in "
                           "our request: JSON patch %s %s failed: %s" % (
                               op.get("op") if isinstance(op, dict) else op,
                               op.get("path") if isinstance(op, dict) else "", x))
    return doc


# --------------------------------------------------------------------- tables

TABLE_CT = "application/json;as=Table;v=v1;g=meta.k8s.io"


def jsonpath_get(obj, jp):
    v = obj
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", jp.lstrip(".")):
        if part.startswith("["):
            i = int(part[1:-1])
            v = v[i] if isinstance(v, list) and i < len(v) else None
        else:
            v = v.get(part) if isinstance(v, dict) else None
        if v is None:
            return None
    return v


def age(obj):
    t = parse_rfc3339(obj.get("metadata", {}).get("creationTimestamp"))
    return human_duration(time.time() - t.timestamp()) if t else "<unknown>"


def columns_for(rd):
    col = lambda n, t, d, f="", p=0: {"name": n, "type": t, "format": f, "description": d,
                                      "priority": p}
    name = col("Name", "string", "Name must be unique within a namespace.", "name")
    agecol = col("Age", "string", "CreationTimestamp is a timestamp representing the server "
                 "time when this object was created.")
    if rd.columns is not None:
        cols = [name]
        for c in rd.columns:
            cols.append(col(c["name"], "string" if c.get("type") == "date" else c.get(
                "type", "string"), c.get("description", ""), c.get("format", ""),
                c.get("priority", 0)))
        return cols, [("name",)] + [("date" if c.get("type") == "date" else "path",
                                     c["jsonPath"]) for c in rd.columns]
    if rd.key == ("", "pods"):
        return ([name, col("Ready", "string", "containers ready"), col(
            "Status", "string", "pod phase"), col("Restarts", "string", "restarts"), agecol],
            [("name",), ("ready",), ("path", ".status.phase"), ("restarts",), ("age",)])
    if rd.key in (("", "namespaces"), ("", "nodes")):
        return [name, col("Status", "string", "phase"), agecol], [
            ("name",), ("path", ".status.phase"), ("age",)]
    return [name, agecol], [("name",), ("age",)]


def table_row(obj, cells, include):
    row = {"cells": cells}
    if include == "Object":
        row["object"] = obj
    elif include != "None":
        row["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                         "metadata": obj.get("metadata", {})}
    return row


def to_table(rd, objs, include, list_meta=None):
    cols, getters = columns_for(rd)
    rows = []
    for o in objs:
        cells = []
        for g in getters:
            if g[0] == "name":
                cells.append(o["metadata"].get("name"))
            elif g[0] == "age":
                cells.append(age(o))
            elif g[0] == "date":
                t = parse_rfc3339(jsonpath_get(o, g[1]))
                cells.append(human_duration(time.time() - t.timestamp()) if t else "<unknown>")
            elif g[0] == "ready":
                cs = (o.get("status") or {}).get("containerStatuses") or []
                n = len((o.get("spec") or {}).get("containers") or [])
                cells.append("%d/%d" % (sum(1 for c in cs if c.get("ready")), n))
            elif g[0] == "restarts":
                cells.append(sum(c.get("restartCount", 0) for c in (o.get("status") or {}).get(
                    "containerStatuses") or []))
            else:
                v = jsonpath_get(o, g[1])
                cells.append(v if not isinstance(v, (dict, list)) else json.dumps(v))
        rows.append(table_row(o, cells, include))
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta or {},
            "columnDefinitions": cols, "rows": rows}


def wants_table(accept):
    return "as=Table" in (accept or "")


# ------------------------------------------------------------ HTTP/TLS, routes


def discovery_groups(store):
    groups = {}
    for rd in store.resources.values():
        if rd.group:
            groups.setdefault(rd.group, rd.version)
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
        {"name": g, "versions": [{"groupVersion": g + "/" + v, "version": v}],
         "preferredVersion": {"groupVersion": g + "/" + v, "version": v}}
        for g, v in groups.items()]}


def resources_of(store, group, version):
    return [rd for rd in store.resources.values() if rd.group == group and rd.version == version]


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "traceprof-test-apiserver"

    def log_message(self, fmt, *args):
        pass

    def do_GET(self):
        self.dispatch()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_GET

    # -- plumbing
    def log_request_line(self, code, user):
        srv = self.server
        if srv.log_path:
            u = urllib.parse.urlsplit(self.path)
            with srv.log_lock, open(srv.log_path, "a") as f:
                f.write("%s %s %s ?%s %d user=%s\n" % (now_rfc3339(), self.command, u.path,
                                                      u.query, code, user or "-"))

    def send_json(self, code, obj, ctype="application/json", warnings=()):
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-cache, private")
        for w in warnings:
            self.send_header("Warning", '299 - "%s"' % w.replace('"', "'"))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def send_text(self, code, text):
        data = text.encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def authenticate(self):
        srv = self.server
        h = self.headers.get("Authorization", "")
        if h.startswith("Bearer "):
            tok = h[7:].strip()
            if secrets.compare_digest(tok, srv.token):
                return "traceprof-test-admin"
            entry = srv.extra_tokens().get(tok)
            if entry:
                return entry[0]
            return None
        try:
            cert = self.connection.getpeercert()
        except (ValueError, AttributeError):
            cert = None
        if cert:
            for rdn in cert.get("subject", ()):
                for k, v in rdn:
                    if k == "commonName":
                        return v
        return None

    def dispatch(self):
        user, code = None, 500
        try:
            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(n) if n else b""
            user = self.authenticate()
            if user is None:
                raise ApiError(401, "Unauthorized", "Unauthorized")
            if self.injected_refusal():
                code = self.injected_code
            else:
                self.injected_delay()
                code = self.route(body, user)
        except ApiError as e:
            code = e.code
            self.send_json(e.code, e.status())
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            self.close_connection = True
            return
        except Exception as e:  # a bug here must show, not kill the server
            code = 500
            self.send_json(500, ApiError(500, "InternalError", "internal error: %r" % e).status())
        self.log_request_line(code, user)

    def fault_matches(self, f):
        """Whether this request matches a fault's methods, path and watch keys."""
        u = urllib.parse.urlsplit(self.path)
        if f.get("methods") and self.command not in f["methods"]:
            return False
        if f.get("path") and f["path"] not in u.path:
            return False
        if "watch" in f and f["watch"] != ("watch=" in u.query):
            return False
        return True

    def injected_delay(self):
        """Holds a matching request for the fault "delay" (faults.json), then serves it:
        a slow API server (the write is applied, and answered, after the delay)."""
        f = self.server.faults().get("delay")
        if f and self.fault_matches(f):
            time.sleep(float(f.get("seconds", 1)))

    def injected_refusal(self):
        """Answers with the fault "refuse" (faults.json) when this request matches it."""
        f = self.server.faults().get("refuse")
        if not f:
            return False
        if not self.fault_matches(f):
            return False
        if not self.server.fault_take("refuse", f.get("count")):
            return False
        code = int(f.get("status", 429))
        reasons = {409: "Conflict", 429: "TooManyRequests", 500: "InternalError",
                   503: "ServiceUnavailable", 504: "Timeout"}
        st = ApiError(code, reasons.get(code, "InternalError"),
                      f.get("message", "injected fault %d" % code)).status()
        data = json.dumps(st).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if f.get("retry_after") is not None:
            self.send_header("Retry-After", str(f["retry_after"]))
        self.end_headers()
        self.wfile.write(data)
        self.injected_code = code
        return True

    def route(self, body, user):
        srv, store = self.server, self.server.store
        u = urllib.parse.urlsplit(self.path)
        q = {k: v[-1] for k, v in urllib.parse.parse_qs(u.query, keep_blank_values=True).items()}
        path = u.path.rstrip("/") or "/"
        segs = [s for s in path.split("/") if s]
        if path in ("/healthz", "/readyz", "/livez"):
            self.send_text(200, "ok")
            return 200
        if path == "/version":
            self.send_json(200, {"major": "1", "minor": "32", "gitVersion": "v1.32.0",
                                 "gitCommit": "traceprof-test-apiserver", "gitTreeState": "clean",
                                 "buildDate": "2025-01-01T00:00:00Z", "goVersion": "go1.23",
                                 "compiler": "gc", "platform": "linux/amd64"})
            return 200
        with store.lock:
            if path == "/api":
                self.send_json(200, {"kind": "APIVersions", "versions": ["v1"],
                                     "serverAddressByClientCIDRs": [{
                                         "clientCIDR": "0.0.0.0/0",
                                         "serverAddress": "127.0.0.1:%d" % srv.port}]})
                return 200
            if path == "/apis":
                self.send_json(200, discovery_groups(store))
                return 200
            if segs[:1] == ["openapi"]:
                return self.openapi(segs)
            if segs[:1] == ["api"] and len(segs) >= 2:
                group, version, rest = "", segs[1], segs[2:]
            elif segs[:1] == ["apis"] and len(segs) >= 3:
                group, version, rest = segs[1], segs[2], segs[3:]
            else:
                raise ApiError(404, "NotFound", "the server could not find the requested "
                               "resource", {})
            rds = resources_of(store, group, version)
            if not rds:
                raise ApiError(404, "NotFound", "the server could not find the requested "
                               "resource", {})
            if not rest:
                self.send_json(200, {"kind": "APIResourceList", "apiVersion": "v1",
                                     "groupVersion": group + "/" + version if group else version,
                                     "resources": [r for rd in rds for r in api_resource(rd)]})
                return 200
        byname = {rd.plural: rd for rd in rds}
        ns = ""
        if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] in byname and \
                byname[rest[2]].namespaced:
            ns, rest = rest[1], rest[2:]
        rd = byname.get(rest[0])
        if rd is None or len(rest) > 3 or (rd.namespaced and not ns and len(rest) > 1):
            raise ApiError(404, "NotFound", "the server could not find the requested resource",
                           {})
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if sub and (sub != "status" or not rd.status):
            raise ApiError(404, "NotFound", "the server could not find the requested resource",
                           {})
        return self.resource(rd, ns, name, sub, q, body)

    def openapi(self, segs):
        store = self.server.store
        if segs == ["openapi", "v3"]:
            gvs = {}
            for rd in store.resources.values():
                gvs.setdefault((rd.group, rd.version), []).append(rd)
            paths = {}
            for (g, v), rds in gvs.items():
                p = "apis/%s/%s" % (g, v) if g else "api/v1"
                h = hashlib.sha256(json.dumps(openapi_v3_doc(rds), sort_keys=True).encode())
                paths[p] = {"serverRelativeURL": "/openapi/v3/%s?hash=%s" % (
                    p, h.hexdigest()[:32].upper())}
            self.send_json(200, {"paths": paths})
            return 200
        if segs[:2] == ["openapi", "v3"] and len(segs) in (4, 5):
            g, v = ("", segs[3]) if segs[2] == "api" else (segs[3], segs[4] if len(segs) > 4
                                                           else "")
            rds = resources_of(store, g, v)
            if rds:
                self.send_json(200, openapi_v3_doc(rds))
                return 200
        raise ApiError(404, "NotFound", "the server could not find the requested resource "
                       "(this test server serves OpenAPI v3 only)", {})

    def resource(self, rd, ns, name, sub, q, body):
        store, m = self.server.store, self.command
        accept = self.headers.get("Accept", "")
        strict = q.get("fieldValidation", "") == "Strict"
        warnings = []
        if q.get("dryRun"):
            raise bad_request("dryRun is not supported by this test server")
        if name is None and m in ("GET", "HEAD"):
            if q.get("watch") in ("true", "1"):
                return self.watch(rd, ns, q, wants_table(accept), q.get("includeObject"))
            return self.list(rd, ns, q, accept)
        with store.lock:
            if name is None and m == "POST":
                obj = decode_json(body)
                res = store.create(rd, ns, obj, strict, warnings)
                self.send_json(201, res, warnings=warnings)
                return 201
            if name is None and m == "DELETE":
                lsel = parse_label_selector(q.get("labelSelector"))
                fsel = parse_field_selector(q.get("fieldSelector"), rd)
                gone = []
                for o in store.list(rd, ns):
                    if labels_match(lsel, o["metadata"].get("labels")) and fields_match(fsel, o):
                        gone.append(store.delete(rd, o["metadata"].get("namespace", ""),
                                                 o["metadata"]["name"]))
                self.send_json(200, {"kind": rd.kind + "List", "apiVersion": rd.gv,
                                     "metadata": {"resourceVersion": str(store.rv)},
                                     "items": gone})
                return 200
            if name is None:
                raise ApiError(405, "MethodNotAllowed", "the server does not allow this method "
                               "on the requested resource", {})
            if m in ("GET", "HEAD"):
                obj = store.get(rd, ns, name)
                if wants_table(accept):
                    self.send_json(200, to_table(rd, [obj], q.get("includeObject")), TABLE_CT)
                else:
                    self.send_json(200, obj)
                return 200
            if m == "PUT":
                res = store.update(rd, ns, name, decode_json(body), sub, strict, warnings)
                self.send_json(200, res, warnings=warnings)
                return 200
            if m == "PATCH":
                res = self.patch(rd, ns, name, sub, body, strict, warnings)
                self.send_json(200, res, warnings=warnings)
                return 200
            if m == "DELETE":
                opts = decode_json(body) if body else {}
                pre = ((opts or {}).get("preconditions") or {}).get("resourceVersion")
                res = store.delete(rd, ns, name, pre)
                self.send_json(200, res)
                return 200
        raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the "
                       "requested resource", {})

    def patch(self, rd, ns, name, sub, body, strict, warnings):
        store = self.server.store
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        kinds = ["application/json-patch+json", "application/merge-patch+json"]
        if rd.schema is None:
            kinds.append("application/strategic-merge-patch+json")
        if ctype not in kinds:
            raise ApiError(415, "UnsupportedMediaType", "the body of the request was in an "
                           "unknown format - accepted media types include: %s%s" % (
                               ", ".join(kinds), " (server-side apply is not implemented by "
                               "this test server)" if ctype == "application/apply-patch+yaml"
                               else ""))
        patch = decode_json(body)
        cur = store.bucket(rd.key).get((ns if rd.namespaced else "", name))
        if cur is None:
            raise not_found(rd, name)
        cur = store.present(rd, cur)
        if ctype == "application/json-patch+json":
            new = json_patch(cur, plain(patch))
        elif ctype == "application/merge-patch+json":
            new = merge_patch(cur, patch)
        else:
            new = strategic_patch(cur, patch)
        if not isinstance(new, dict):
            raise bad_request("the patch did not produce an object")
        prv = ((patch.get("metadata") or {}).get("resourceVersion")
               if isinstance(patch, dict) else None)
        if prv and prv != cur["metadata"]["resourceVersion"]:
            raise conflict(rd, name)
        new.setdefault("metadata", {})["resourceVersion"] = cur["metadata"]["resourceVersion"]
        if not isinstance(new.get("metadata"), dict):
            raise bad_request("metadata must be an object")
        return store.update(rd, ns, name, new, sub, strict, warnings)

    def list(self, rd, ns, q, accept):
        store = self.server.store
        lsel = parse_label_selector(q.get("labelSelector"))
        fsel = parse_field_selector(q.get("fieldSelector"), rd)
        rvq, start = q.get("resourceVersion", ""), None
        with store.lock:
            if rvq not in ("", "0"):
                if not rvq.isdigit():
                    raise bad_request('invalid resource version "%s"' % rvq)
                if int(rvq) > store.rv:
                    raise ApiError(504, "Timeout", "Too large resource version: %s, current: %d"
                                   % (rvq, store.rv), {"causes": [{
                                       "reason": "ResourceVersionTooLarge",
                                       "message": "Too large resource version"}],
                                       "retryAfterSeconds": 1})
                if q.get("resourceVersionMatch") == "Exact" and int(rvq) != store.rv:
                    raise ApiError(410, "Expired", "too old resource version: %s (%d)" % (
                        rvq, store.rv))
            if q.get("continue"):
                try:
                    tok = json.loads(base64.urlsafe_b64decode(q["continue"].encode()))
                    start, tok_rv = tuple(tok["start"]), tok["rv"]
                except (ValueError, KeyError, TypeError):
                    raise bad_request("continue key is not valid: incorrect encoded start "
                                      "resourceVersion (version meta.k8s.io/v1)")
                if tok_rv < store.floor:
                    raise ApiError(410, "Expired", "The provided continue parameter is too old "
                                   "to display a consistent list result. You can start a new list "
                                   "without the continue parameter.")
            items = [o for o in store.list(rd, ns)
                     if labels_match(lsel, o["metadata"].get("labels")) and fields_match(fsel, o)
                     and (start is None or (o["metadata"].get("namespace", ""),
                                            o["metadata"]["name"]) > start)]
            meta = {"resourceVersion": str(store.rv)}
            limit = int(q.get("limit") or 0)
            if limit > 0 and len(items) > limit:
                last = items[limit - 1]["metadata"]
                meta["continue"] = base64.urlsafe_b64encode(json.dumps({
                    "rv": store.rv, "start": [last.get("namespace", ""), last["name"]]}).encode()
                ).decode()
                meta["remainingItemCount"] = len(items) - limit
                items = items[:limit]
        if wants_table(accept):
            self.send_json(200, to_table(rd, items, q.get("includeObject"), meta), TABLE_CT)
        else:
            self.send_json(200, {"kind": rd.kind + "List", "apiVersion": rd.gv,
                                 "metadata": meta, "items": items})
        return 200

    # -- watch
    def chunk(self, obj):
        data = (json.dumps(obj) + "\n").encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def watch(self, rd, ns, q, table, include):
        srv, store = self.server, self.server.store
        lsel = parse_label_selector(q.get("labelSelector"))
        fsel = parse_field_selector(q.get("fieldSelector"), rd)
        timeout = float(q.get("timeoutSeconds") or 1800)
        deadline = time.monotonic() + timeout
        bookmarks = q.get("allowWatchBookmarks") == "true"
        rvq = q.get("resourceVersion", "")
        if rvq not in ("", "0") and not rvq.isdigit():
            raise bad_request('invalid resource version "%s"' % rvq)
        match = lambda o: o is not None and (not ns or o["metadata"].get("namespace") == ns) \
            and labels_match(lsel, o["metadata"].get("labels")) and fields_match(fsel, o)
        wrap = lambda o: to_table(rd, [o], include) if table else o
        expired = None
        with store.lock:
            if rvq in ("", "0"):
                initial = [o for o in store.list(rd, ns) if match(o)]
                cursor = store.rv
            else:
                initial, cursor = [], int(rvq)
                if cursor < store.floor:
                    expired = "too old resource version: %d (%d)" % (cursor, store.floor + 1)
        f = srv.faults()
        self.send_response(200)
        self.send_header("Content-Type", TABLE_CT if table else "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()
        if f.get("watch_close_at_once"):
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            return 200
        try:
            if expired:
                self.chunk({"type": "ERROR", "object": ApiError(410, "Expired", expired).status()})
            else:
                for o in initial:
                    self.chunk({"type": "ADDED", "object": wrap(o)})
                self.watch_loop(rd, cursor, deadline, bookmarks, match, wrap)
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
            self.close_connection = True
        return 200

    def watch_held(self, f):
        """Seconds the fault "watch_delay" holds this watch's events back (0: none)."""
        d = f.get("watch_delay")
        if not d or (d.get("path") and d["path"] not in urllib.parse.urlsplit(self.path).path):
            return 0.0
        return float(d.get("seconds", 1))

    def watch_loop(self, rd, cursor, deadline, bookmarks, match, wrap):
        srv, store = self.server, self.server.store
        held = []  # (when it happened, event) not sent yet (fault "watch_delay")
        last_bookmark = time.monotonic()
        seen, end_at, reset_at, gone_at = None, None, None, None
        while not srv.stopping.is_set():
            now = time.monotonic()
            f = srv.faults()
            if f is not seen:
                # timers of the faults in force, from when this watch saw them
                seen, end_at, reset_at, gone_at = f, None, None, None
                if f.get("watch_close_after"):
                    end_at = now + random.uniform(*f["watch_close_after"])
                if f.get("watch_reset_after"):
                    reset_at = now + random.uniform(*f["watch_reset_after"])
                if f.get("watch_gone_after") is not None:
                    gone_at = now + float(f["watch_gone_after"])
            if now >= deadline or (end_at is not None and now >= end_at) or \
                    f.get("watch_close_at_once"):
                return
            if reset_at is not None and now >= reset_at:
                # a TCP reset mid-stream, as a restarting proxy or node gives
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                           struct.pack("ii", 1, 0))
                self.connection.close()
                raise ConnectionResetError("injected reset")
            if gone_at is not None and now >= gone_at:
                self.chunk({"type": "ERROR", "object": ApiError(
                    410, "Expired", "too old resource version: %d (%d)" % (
                        cursor, cursor + 1)).status()})
                return
            with store.lock:
                if store.rv <= cursor:
                    store.lock.wait(min(0.2, deadline - now))
                if cursor < store.floor:
                    self.chunk({"type": "ERROR", "object": ApiError(
                        410, "Expired", "too old resource version: %d (%d)" % (
                            cursor, store.floor + 1)).status()})
                    return
                evs = [e for e in store.events if e[0] > cursor]
                cursor = max(cursor, store.rv)
            for _, key, typ, obj, old in evs:
                if key != rd.key:
                    continue
                obj = store.present(rd, obj)
                now_m, was_m = match(obj), match(old)
                if typ == "MODIFIED" and now_m != was_m:
                    typ = "ADDED" if now_m else "DELETED"
                elif typ == "DELETED":
                    now_m = was_m or now_m
                if now_m or (typ == "DELETED" and was_m):
                    held.append((time.monotonic(), {"type": typ, "object": wrap(obj)}))
            hold = self.watch_held(f)
            while held and time.monotonic() - held[0][0] >= hold:
                self.chunk(held.pop(0)[1])
            if held:
                continue  # no bookmark past an event held back
            if bookmarks and time.monotonic() - last_bookmark >= srv.bookmark_interval:
                last_bookmark = time.monotonic()
                self.chunk({"type": "BOOKMARK", "object": {
                    "kind": rd.kind, "apiVersion": rd.gv,
                    "metadata": {"resourceVersion": str(cursor)}}})


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    block_on_close = False

    def finish_request(self, request, client_address):
        """TLS handshake in the connection's own thread, then HTTP."""
        try:
            request.settimeout(10)
            tls = self.ctx.wrap_socket(request, server_side=True)
            tls.settimeout(None)
        except (ssl.SSLError, OSError):
            return
        try:
            super().finish_request(tls, client_address)
        finally:
            try:
                tls.close()
            except OSError:
                pass

    def faults(self):
        """DIR/faults.json (README, "Faults"), re-read when it changes; {} without it."""
        p = os.path.join(self.state_dir, "faults.json")
        try:
            mt = os.stat(p).st_mtime_ns
        except OSError:
            self.fault_cfg, self.fault_mtime = {}, None
            return {}
        if mt != self.fault_mtime:
            try:
                with open(p) as f:
                    cfg = json.load(f)
            except (OSError, ValueError):
                cfg = {}
            with self.fault_lock:
                self.fault_cfg, self.fault_mtime, self.fault_used = cfg, mt, {}
        return self.fault_cfg

    def fault_take(self, name, count):
        """True while fault name has been used fewer than count times (None: always)."""
        with self.fault_lock:
            n = self.fault_used.get(name, 0)
            if count is not None and n >= count:
                return False
            self.fault_used[name] = n + 1
            return True

    def extra_tokens(self):
        """DIR/tokens.csv in the static token file format, re-read when it changes."""
        p = os.path.join(self.state_dir, "tokens.csv")
        try:
            mt = os.stat(p).st_mtime_ns
        except OSError:
            return {}
        if mt != self.tokens_mtime:
            import csv
            toks = {}
            with open(p, newline="") as f:
                for row in csv.reader(f):
                    if len(row) >= 2 and row[0].strip() and not row[0].startswith("#"):
                        toks[row[0].strip()] = (row[1], row[2] if len(row) > 2 else "",
                                                row[3].split(",") if len(row) > 3 else [])
            self.tokens, self.tokens_mtime = toks, mt
        return self.tokens


# ----------------------------------------------------------------------- main


def openssl(*args):
    subprocess.run(["openssl"] + list(args), check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.PIPE)


def make_pki(d):
    """CA, server and client certificates with the openssl command line."""
    p = lambda n: os.path.join(d, n)
    if all(os.path.exists(p(n)) for n in ("ca.crt", "ca.key", "server.crt", "server.key",
                                          "client.crt", "client.key")):
        return
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl("req", "-x509", *ec, "-keyout", p("ca.key"), "-out", p("ca.crt"), "-days", "3650",
            "-subj", "/CN=traceprof-test-ca", "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    for who, subj, ext in (
            ("server", "/CN=127.0.0.1", "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
             "extendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature\n"),
            ("client", "/O=system:masters/CN=traceprof-test-admin",
             "extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature\n")):
        openssl("req", *ec, "-keyout", p(who + ".key"), "-out", p(who + ".csr"), "-subj", subj)
        with open(p(who + ".ext"), "w") as f:
            f.write(ext)
        openssl("x509", "-req", "-in", p(who + ".csr"), "-CA", p("ca.crt"), "-CAkey",
                p("ca.key"), "-CAcreateserial", "-out", p(who + ".crt"), "-days", "3650",
                "-extfile", p(who + ".ext"))
        os.unlink(p(who + ".csr"))
        os.unlink(p(who + ".ext"))
    for n in ("ca.key", "server.key", "client.key"):
        os.chmod(p(n), 0o600)


def kubeconfig(d, port, auth, token):
    user = ("    token: %s\n" % token if auth == "token" else
            "    client-certificate: %s\n    client-key: %s\n" % (
                os.path.join(d, "client.crt"), os.path.join(d, "client.key")))
    return ("apiVersion: v1\nkind: Config\nclusters:\n- name: traceprof-test\n  cluster:\n"
            "    server: https://127.0.0.1:%d\n    certificate-authority: %s\nusers:\n"
            "- name: traceprof-test-admin\n  user:\n%scontexts:\n- name: traceprof-test\n"
            "  context:\n    cluster: traceprof-test\n    user: traceprof-test-admin\n"
            "current-context: traceprof-test\n" % (port, os.path.join(d, "ca.crt"), user))


def main():
    ap = argparse.ArgumentParser(description="A stand-in for kube-apiserver used by "
                                 "traceprof's tests; not shipped.")
    ap.add_argument("--state-dir", required=True)
    ap.add_argument("--port", type=int)
    ap.add_argument("--history", type=int, default=1000)
    ap.add_argument("--bookmark-interval", type=float, default=1.0)
    ap.add_argument("--auth", choices=("token", "cert"), default="token")
    ap.add_argument("--token")
    ap.add_argument("--log")
    a = ap.parse_args()
    if a.history < 1:
        ap.error("--history must be at least 1")
    d = os.path.abspath(a.state_dir)
    os.makedirs(d, exist_ok=True)
    try:
        make_pki(d)
    except (subprocess.CalledProcessError, OSError) as e:
        sys.exit("kube_test_apiserver: creating certificates with openssl failed: %s %s" % (
            e, getattr(e, "stderr", b"").decode(errors="replace")))
    tokfile = os.path.join(d, "token")
    if a.token:
        token = a.token
        write_atomic(tokfile, token + "\n")
    elif os.path.exists(tokfile):
        token = open(tokfile).read().strip()
    else:
        token = secrets.token_hex(24)
        write_atomic(tokfile, token + "\n")
    os.chmod(tokfile, 0o600)
    port = a.port
    if port is None and os.path.exists(os.path.join(d, "port")):
        port = int(open(os.path.join(d, "port")).read().strip() or 0)
    try:
        store = Store(os.path.join(d, "store.json"), a.history)
    except (OSError, ValueError, KeyError) as e:
        sys.exit("kube_test_apiserver: cannot load %s: %s" % (os.path.join(d, "store.json"), e))
    try:
        srv = Server(("127.0.0.1", port or 0), Handler)
    except OSError as e:
        sys.exit("kube_test_apiserver: cannot listen on 127.0.0.1:%s: %s" % (port, e))
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(os.path.join(d, "server.crt"), os.path.join(d, "server.key"))
    ctx.load_verify_locations(os.path.join(d, "ca.crt"))
    ctx.verify_mode = ssl.CERT_OPTIONAL
    ctx.set_alpn_protocols(["http/1.1"])
    srv.ctx, srv.store, srv.token, srv.state_dir = ctx, store, token, d
    srv.port = srv.server_address[1]
    srv.log_path = os.path.abspath(a.log) if a.log else None
    srv.log_lock, srv.stopping = threading.Lock(), threading.Event()
    srv.bookmark_interval, srv.tokens, srv.tokens_mtime = a.bookmark_interval, {}, None
    srv.fault_cfg, srv.fault_mtime, srv.fault_used = {}, None, {}
    srv.fault_lock = threading.Lock()

    def stop(signum, frame):
        srv.stopping.set()
        threading.Thread(target=srv.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    write_atomic(os.path.join(d, "pid"), "%d\n" % os.getpid())
    write_atomic(os.path.join(d, "port"), "%d\n" % srv.port)
    write_atomic(os.path.join(d, "kubeconfig"), kubeconfig(d, srv.port, a.auth, token))
    threading.Thread(target=store.flusher, args=(srv.stopping,), daemon=True).start()
    srv.serve_forever(poll_interval=0.1)
    srv.server_close()
    store.flush()
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
