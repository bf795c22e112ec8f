#!/usr/bin/python3
"""helm_render.py - renders the traceprof Helm chart without helm.

No helm binary can be installed where traceprof is built and tested, so
the chart (written for Helm 3) is rendered here by a renderer of exactly
the subset of Go templates and Sprig functions the chart uses:

  actions      {{ pipeline }}, {{- and -}} trimming, {{/* comments */}},
               if / else / end, with / else / end, range / end (lists and
               maps; `range $i, $v := ...` too), define / end, variables
               ($x := pipeline, $x.field), parentheses, pipes
  data         .Values, .Release.Name/.Namespace/.Service, .Chart.Name/
               .Version/.AppVersion, string, number, true/false literals
  functions    include, toYaml, nindent, indent, quote, default, required,
               b64enc, randAlphaNum, lookup (always empty: no cluster),
               trimSuffix, printf (%s %d %v), index, eq, ne, and, or, not

Anything else in a template (another action or function, `else if`,
`template`, `tpl`) is an error naming the file and line, so the chart cannot
silently use a construct this renderer would get wrong. Values are checked
against the chart's values.schema.json (the JSON Schema subset used there:
type, properties, additionalProperties, required, enum, minimum, maximum,
pattern, items), as Helm does.

Usage: helm_render.py CHART [-n NAMESPACE] [--name RELEASE] [-f values.yaml]...
                      [--set a.b=c]... [--include-crds] [-o FILE]
YAML comes from python3-yaml (PyYAML, a Debian package).
"""

import argparse
import base64
import json
import re
import secrets
import string
import sys
from pathlib import Path

import yaml


class RenderError(Exception):
    pass


# ---- lexer ---------------------------------------------------------------

ACTION = re.compile(r"\{\{(-?)(\s*)(.*?)(\s*)(-?)\}\}", re.S)


def lex(text, fname):
    """Yields ('text', s, line) and ('action', body, line) with trimming applied."""
    out = []
    pos = 0
    for m in ACTION.finditer(text):
        ltrim, body, rtrim = m.group(1) == "-", m.group(3), m.group(5) == "-"
        if ltrim and not m.group(2) and m.group(3):
            raise RenderError(f"{fname}:{text.count(chr(10), 0, m.start()) + 1}: "
                              "'{{-' must be followed by a space")
        out.append(["text", text[pos:m.start()], text.count("\n", 0, pos) + 1, False, ltrim])
        out.append(["action", body, text.count("\n", 0, m.start()) + 1, ltrim, rtrim])
        pos = m.end()
    out.append(["text", text[pos:], text.count("\n", 0, pos) + 1, False, False])
    # apply trimming to the neighbouring text
    for i, tok in enumerate(out):
        if tok[0] != "action":
            continue
        if tok[3] and i > 0:
            out[i - 1][1] = out[i - 1][1].rstrip(" \t\r\n")
        if tok[4] and i + 1 < len(out):
            out[i + 1][1] = out[i + 1][1].lstrip(" \t\r\n")
    return [(t[0], t[1], t[2]) for t in out]


TOKEN = re.compile(r'''\s*(?:
    (?P<str>"(?:[^"\\]|\\.)*")
  | (?P<raw>`[^`]*`)
  | (?P<num>-?\d+(?:\.\d+)?)
  | (?P<assign>:=|=)
  | (?P<pipe>\|)
  | (?P<lp>\()
  | (?P<rp>\))
  | (?P<comma>,)
  | (?P<var>\$[A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)
  | (?P<field>(?:\.[A-Za-z0-9_]+)+|\.)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
)''', re.X)


def tokenize(s, where):
    toks, pos = [], 0
    s = s.rstrip()
    while pos < len(s):
        m = TOKEN.match(s, pos)
        if not m or m.end() == pos:
            raise RenderError(f"{where}: cannot parse {s[pos:]!r}")
        kind = m.lastgroup
        toks.append((kind, m.group(kind)))
        pos = m.end()
    return toks


# ---- parser --------------------------------------------------------------

FUNCS = {"include", "toYaml", "nindent", "indent", "quote", "default", "required", "b64enc",
         "randAlphaNum", "lookup", "trimSuffix", "printf", "index", "eq", "ne", "and", "or",
         "not"}


class Parser:
    def __init__(self, toks, where):
        self.t, self.i, self.where = toks, 0, where

    def peek(self):
        return self.t[self.i] if self.i < len(self.t) else (None, None)

    def take(self):
        tok = self.peek()
        self.i += 1
        return tok

    def pipeline(self):
        decl = None
        if (len(self.t) - self.i >= 2 and self.t[self.i][0] == "var"
                and self.t[self.i + 1][0] == "assign"):
            decl = (self.take()[1], self.take()[1])
        elif (len(self.t) - self.i >= 4 and self.t[self.i][0] == "var"
              and self.t[self.i + 1][0] == "comma"):
            k = self.take()[1]
            self.take()
            v = self.take()[1]
            if self.take()[0] != "assign":
                raise RenderError(f"{self.where}: expected := in range")
            decl = ((k, v), ":=")
        cmds = [self.command()]
        while self.peek()[0] == "pipe":
            self.take()
            cmds.append(self.command())
        return ("pipe", decl, cmds)

    def command(self):
        args = []
        while self.peek()[0] not in (None, "pipe", "rp"):
            args.append(self.operand())
        if not args:
            raise RenderError(f"{self.where}: empty command")
        return args

    def operand(self):
        kind, val = self.take()
        if kind == "str":
            return ("lit", json.loads(val))
        if kind == "raw":
            return ("lit", val[1:-1])
        if kind == "num":
            return ("lit", float(val) if "." in val else int(val))
        if kind == "field":
            return ("field", [p for p in val.split(".") if p])
        if kind == "var":
            parts = val.split(".")
            return ("var", parts[0], parts[1:])
        if kind == "lp":
            p = self.pipeline()
            if self.take()[0] != "rp":
                raise RenderError(f"{self.where}: missing )")
            return p
        if kind == "ident":
            if val in ("true", "false"):
                return ("lit", val == "true")
            if val == "nil":
                return ("lit", None)
            if val not in FUNCS:
                raise RenderError(f"{self.where}: function {val!r} is not supported by this "
                                  "renderer (see scripts/helm_render.py)")
            return ("func", val)
        raise RenderError(f"{self.where}: unexpected {val!r}")


def parse_pipeline(s, where):
    p = Parser(tokenize(s, where), where)
    pl = p.pipeline()
    if p.peek()[0] is not None:
        raise RenderError(f"{where}: unexpected {p.peek()[1]!r}")
    return pl


KEYWORD = re.compile(r"^(if|with|range|define|else|end|template|block|break|continue)\b\s*(.*)$",
                     re.S)


def parse(text, fname, defines):
    """Returns the node list of a template; define blocks go into defines."""
    toks = lex(text, fname)
    root = []
    stack = [("root", root, None)]
    for kind, body, line in toks:
        cur = stack[-1][1]
        if kind == "text":
            if body:
                cur.append(("text", body))
            continue
        where = f"{fname}:{line}"
        if body.startswith("/*"):
            if not body.endswith("*/"):
                raise RenderError(f"{where}: unterminated comment")
            continue
        m = KEYWORD.match(body)
        if not m:
            cur.append(("out", parse_pipeline(body, where), where))
            continue
        kw, rest = m.group(1), m.group(2)
        if kw in ("template", "block", "break", "continue"):
            raise RenderError(f"{where}: {{{{ {kw} }}}} is not supported by this renderer")
        if kw in ("if", "with", "range"):
            node = [kw, parse_pipeline(rest, where), [], None, where]
            cur.append(node)
            stack.append((kw, node[2], node))
        elif kw == "define":
            name = json.loads(rest.strip())
            node = ["define", name, [], None, where]
            defines[name] = (node[2], fname)
            stack.append(("define", node[2], node))
        elif kw == "else":
            if rest.strip():
                raise RenderError(f"{where}: 'else {rest.strip()}' is not supported by this "
                                  "renderer: nest an if instead")
            k, _, node = stack.pop()
            if k not in ("if", "with", "range") or node[3] is not None:
                raise RenderError(f"{where}: else without if/with/range")
            node[3] = []
            stack.append((k, node[3], node))
        elif kw == "end":
            if len(stack) == 1:
                raise RenderError(f"{where}: end without a block")
            stack.pop()
    if len(stack) > 1:
        raise RenderError(f"{fname}: {stack[-1][2][4]}: block not closed with end")
    return root


# ---- evaluation ----------------------------------------------------------


def truthy(v):
    if v is None or v is False:
        return False
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return v != 0
    if isinstance(v, (str, list, dict)):
        return len(v) > 0
    return True


def to_str(v):
    if v is None:
        return ""
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    if isinstance(v, (dict, list)):
        return json.dumps(v)
    return str(v)


def to_yaml(v):
    if v is None:
        return "null"
    return yaml.safe_dump(v, default_flow_style=False, sort_keys=True).rstrip("\n")


def go_printf(fmt, *args):
    out, ai, i = [], 0, 0
    while i < len(fmt):
        c = fmt[i]
        if c == "%" and i + 1 < len(fmt):
            verb = fmt[i + 1]
            i += 2
            if verb == "%":
                out.append("%")
                continue
            if verb not in "sdvq":
                raise RenderError(f"printf verb %{verb} is not supported")
            a = args[ai] if ai < len(args) else None
            ai += 1
            out.append(json.dumps(to_str(a)) if verb == "q" else to_str(a))
            continue
        out.append(c)
        i += 1
    return "".join(out)


class Renderer:
    def __init__(self, defines, top):
        self.defines, self.top = defines, top

    def lookup_path(self, v, parts):
        for p in parts:
            if isinstance(v, dict):
                v = v.get(p)
            else:
                return None
        return v

    def call(self, name, args, where):
        a = args
        if name == "include":
            tname, ctx = a
            if tname not in self.defines:
                raise RenderError(f"{where}: include of undefined template {tname!r}")
            nodes, _ = self.defines[tname]
            return self.run(nodes, ctx, {"$": ctx})
        if name == "toYaml":
            return to_yaml(a[0])
        if name == "nindent":
            return "\n" + "\n".join(" " * a[0] + ln if ln else ln
                                    for ln in to_str(a[1]).split("\n"))
        if name == "indent":
            return "\n".join(" " * a[0] + ln if ln else ln for ln in to_str(a[1]).split("\n"))
        if name == "quote":
            return " ".join(json.dumps(to_str(x)) for x in a)
        if name == "default":
            return a[1] if truthy(a[1]) else a[0]
        if name == "required":
            if not truthy(a[1]):
                raise RenderError(f"{where}: {a[0]}")
            return a[1]
        if name == "b64enc":
            return base64.b64encode(to_str(a[0]).encode()).decode()
        if name == "randAlphaNum":
            alphabet = string.ascii_letters + string.digits
            return "".join(secrets.choice(alphabet) for _ in range(int(a[0])))
        if name == "lookup":
            return {}
        if name == "trimSuffix":
            s = to_str(a[1])
            return s[:-len(a[0])] if a[0] and s.endswith(a[0]) else s
        if name == "printf":
            return go_printf(to_str(a[0]), *a[1:])
        if name == "index":
            v = a[0]
            for k in a[1:]:
                v = v.get(k) if isinstance(v, dict) else (v[k] if isinstance(v, list) else None)
            return v
        if name == "eq":
            return any(a[0] == x for x in a[1:])
        if name == "ne":
            return a[0] != a[1]
        if name == "and":
            for x in a:
                if not truthy(x):
                    return x
            return a[-1]
        if name == "or":
            for x in a:
                if truthy(x):
                    return x
            return a[-1]
        if name == "not":
            return not truthy(a[0])
        raise RenderError(f"{where}: function {name} not supported")

    def operand(self, op, dot, scope, where):
        k = op[0]
        if k == "lit":
            return op[1]
        if k == "field":
            return self.lookup_path(dot, op[1])
        if k == "var":
            if op[1] not in scope:
                raise RenderError(f"{where}: undefined variable {op[1]}")
            return self.lookup_path(scope[op[1]], op[2])
        if k == "pipe":
            return self.pipeline(op, dot, scope, where)
        if k == "func":
            return self.call(op[1], [], where)
        raise RenderError(f"{where}: bad operand")

    def command(self, cmd, dot, scope, where, piped):
        has_piped = piped is not _NOTHING
        if cmd[0][0] == "func":
            args = [self.operand(o, dot, scope, where) for o in cmd[1:]]
            if has_piped:
                args.append(piped)
            return self.call(cmd[0][1], args, where)
        if len(cmd) != 1 or has_piped:
            raise RenderError(f"{where}: a value cannot take arguments")
        return self.operand(cmd[0], dot, scope, where)

    def pipeline(self, pl, dot, scope, where):
        _, decl, cmds = pl
        v = _NOTHING
        for c in cmds:
            v = self.command(c, dot, scope, where, v)
        if decl and isinstance(decl[0], str):
            scope[decl[0]] = v
        return v

    def run(self, nodes, dot, scope):
        out = []
        for n in nodes:
            if n[0] == "text":
                out.append(n[1])
            elif n[0] == "out":
                pl = n[1]
                v = self.pipeline(pl, dot, scope, n[2])
                if not pl[1]:
                    out.append(to_str(v))
            elif n[0] in ("if", "with"):
                kw, pl, body, els, where = n
                v = self.pipeline(pl, dot, scope, where)
                inner = dict(scope)
                if truthy(v):
                    out.append(self.run(body, v if kw == "with" else dot, inner))
                elif els is not None:
                    out.append(self.run(els, dot, inner))
            elif n[0] == "range":
                kw, pl, body, els, where = n
                decl = pl[1]
                v = self.pipeline(("pipe", None, pl[2]), dot, scope, where)
                items = list(v.items()) if isinstance(v, dict) else list(enumerate(v or []))
                if isinstance(v, dict):
                    items.sort()
                for k, item in items:
                    inner = dict(scope)
                    if decl:
                        if isinstance(decl[0], tuple):
                            inner[decl[0][0]], inner[decl[0][1]] = k, item
                        else:
                            inner[decl[0]] = item
                    out.append(self.run(body, item, inner))
                if not items and els is not None:
                    out.append(self.run(els, dot, dict(scope)))
        return "".join(out)


_NOTHING = object()


# ---- values and schema ---------------------------------------------------


def merge(base, over):
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(base.get(k), dict):
            merge(base[k], v)
        else:
            base[k] = v
    return base


def set_value(values, expr):
    key, sep, raw = expr.partition("=")
    if not sep or not key:
        raise RenderError(f"--set {expr!r}: want key.path=value")
    if raw in ("true", "false"):
        val = raw == "true"
    elif re.fullmatch(r"-?\d+", raw):
        val = int(raw)
    elif raw == "null":
        val = None
    else:
        val = raw
    parts = key.split(".")
    d = values
    for p in parts[:-1]:
        d = d.setdefault(p, {})
        if not isinstance(d, dict):
            raise RenderError(f"--set {expr!r}: {p} is not a map")
    d[parts[-1]] = val


JSON_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}


def check_schema(v, s, path, errors):
    where = path or "(root)"
    t = s.get("type")
    if t:
        types = t if isinstance(t, list) else [t]
        ok = False
        for ty in types:
            if ty == "integer":
                ok |= isinstance(v, int) and not isinstance(v, bool)
            elif ty == "number":
                ok |= isinstance(v, (int, float)) and not isinstance(v, bool)
            else:
                ok |= isinstance(v, JSON_TYPES[ty])
        if not ok:
            errors.append(f"{where}: got {type(v).__name__}, want {' or '.join(types)}")
            return
    if "enum" in s and v not in s["enum"]:
        errors.append(f"{where}: {v!r} is not one of {s['enum']}")
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        if "minimum" in s and v < s["minimum"]:
            errors.append(f"{where}: {v} is less than {s['minimum']}")
        if "maximum" in s and v > s["maximum"]:
            errors.append(f"{where}: {v} is more than {s['maximum']}")
    if isinstance(v, str) and "pattern" in s and not re.search(s["pattern"], v):
        errors.append(f"{where}: {v!r} does not match {s['pattern']}")
    if isinstance(v, dict):
        props = s.get("properties", {})
        for r in s.get("required", []):
            if r not in v:
                errors.append(f"{where}: {r} is required")
        for k, item in v.items():
            sub = f"{path}.{k}" if path else k
            if k in props:
                check_schema(item, props[k], sub, errors)
            elif s.get("additionalProperties") is False:
                errors.append(f"{sub}: unknown key (not in values.schema.json)")
            elif isinstance(s.get("additionalProperties"), dict):
                check_schema(item, s["additionalProperties"], sub, errors)
    if isinstance(v, list) and "items" in s:
        for i, item in enumerate(v):
            check_schema(item, s["items"], f"{path}[{i}]", errors)
    unknown = set(s) - {"type", "properties", "additionalProperties", "required", "enum",
                        "minimum", "maximum", "pattern", "items", "description", "$schema",
                        "title"}
    if unknown:
        errors.append(f"{where}: schema keyword(s) {sorted(unknown)} not supported by this "
                      "renderer")


# ---- the chart -----------------------------------------------------------


def context(chart, release, namespace, value_files, sets):
    """The chart's path, the top-level template object (values merged and
    checked against values.schema.json) and the named templates of
    templates/_*.tpl."""
    chart = Path(chart)
    meta = yaml.safe_load((chart / "Chart.yaml").read_text())
    values = yaml.safe_load((chart / "values.yaml").read_text()) or {}
    for f in value_files:
        merge(values, yaml.safe_load(Path(f).read_text()) or {})
    for s in sets:
        set_value(values, s)
    schema_file = chart / "values.schema.json"
    if schema_file.exists():
        errors = []
        check_schema(values, json.loads(schema_file.read_text()), "", errors)
        if errors:
            raise RenderError("values don't meet the specifications of the schema(s):\n- "
                              + "\n- ".join(errors))
    top = {
        "Values": values,
        "Release": {"Name": release, "Namespace": namespace, "Service": "Helm",
                    "IsInstall": True, "IsUpgrade": False},
        "Chart": {"Name": meta["name"], "Version": meta["version"],
                  "AppVersion": meta.get("appVersion", "")},
    }
    defines = {}
    for f in sorted((chart / "templates").glob("_*.tpl")):
        parse(f.read_text(), f"templates/{f.name}", defines)
    return chart, top, defines


def render(chart, release="traceprof", namespace="traceprof", value_files=(), sets=(),
           include_crds=False):
    """Returns the rendered manifests as one multi-document YAML string."""
    chart, top, defines = context(chart, release, namespace, value_files, sets)
    templates = []
    for f in sorted((chart / "templates").iterdir()):
        if f.suffix not in (".yaml", ".yml", ".tpl") or f.name.startswith("_"):
            continue
        templates.append((f.name, parse(f.read_text(), f"templates/{f.name}", defines)))
    r = Renderer(defines, top)
    docs = []
    if include_crds and (chart / "crds").is_dir():
        for f in sorted((chart / "crds").iterdir()):
            docs.append(f"# Source: traceprof/crds/{f.name}\n" + f.read_text().strip("\n"))
    for name, nodes in templates:
        out = r.run(nodes, top, {"$": top})
        for doc in re.split(r"^---\s*$", out, flags=re.M):
            body = doc.strip("\n")
            if not yaml.safe_load(body or "null"):
                continue
            docs.append(f"# Source: traceprof/templates/{name}\n{body}")
    return "---\n" + "\n---\n".join(docs) + "\n"


def notes(chart, release="traceprof", namespace="traceprof", value_files=(), sets=()):
    """The rendered NOTES.txt (what helm prints after install)."""
    chart, top, defines = context(chart, release, namespace, value_files, sets)
    nodes = parse((chart / "templates/NOTES.txt").read_text(), "templates/NOTES.txt", defines)
    return Renderer(defines, top).run(nodes, top, {"$": top})


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("chart")
    ap.add_argument("--name", default="traceprof")
    ap.add_argument("-n", "--namespace", default="traceprof")
    ap.add_argument("-f", "--values", action="append", default=[])
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--include-crds", action="store_true")
    ap.add_argument("--notes", action="store_true", help="print NOTES.txt instead")
    ap.add_argument("-o", "--output")
    a = ap.parse_args()
    try:
        if a.notes:
            text = notes(a.chart, a.name, a.namespace, a.values, a.set)
        else:
            text = render(a.chart, a.name, a.namespace, a.values, a.set, a.include_crds)
    except (RenderError, OSError, yaml.YAMLError) as e:
        print(f"helm_render: {e}", file=sys.stderr)
        return 1
    if a.output:
        Path(a.output).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
