#!/usr/bin/python3
"""Stack completeness and per-function inclusive shares of one workload's
samples, from traceprof's store and from `perf script`, side by side.

usage:
  unwind_stats.py run --name NAME --maps MAPS --agent AGENT.tsv [--perf PERF.txt] [--json OUT]
  unwind_stats.py summary JSON...      (medians over runs of one or more workloads)

AGENT.tsv: one line per stored stack, "samples TAB frames", the frames root
first, separated by 0x1e, each "name 0x1f kind 0x1f module 0x1f address"
(traceprof.functions.kind: 0 user, 1 kernel, 2 unsymbolized; address: the
ELF virtual address, as traceprof.frames stores it).
PERF.txt: `perf script -F comm,tid,ip,sym,dso --no-inline --no-demangle`.
MAPS: /proc/PID/maps of the workload, to find the files behind modules.

A user stack is a sample with at least one user frame. It is complete when
its root-most frame is a thread root: a function named _start,
__libc_start_main, __libc_start_call_main, clone, clone3 or start_thread
(names without their @version), or a frame whose address lies where the
file's CFI marks the return address undefined (how _start and clone3 mark
the outermost frame; this finds them in stripped executables, whose _start
has no name). Inlined frames (consecutive frames of one module and address
in traceprof's stacks) count as their outermost function, as perf shows
them with --no-inline. Standard library only.
"""
import json
import os
import re
import statistics
import subprocess
import sys

ROOT_NAMES = {"_start", "__libc_start_main", "__libc_start_call_main", "clone", "clone3",
              "start_thread"}
FLAG_POINTS = 2.0
SHOW_SHARE = 2.0


def base_name(name):
    return name.split("@", 1)[0]


class Modules:
    """Files behind the workload's mappings: thread-root ranges, aliases."""

    def __init__(self, maps_path):
        self.paths = {}
        with open(maps_path) as f:
            for line in f:
                parts = line.split(None, 5)
                if len(parts) == 6 and parts[5].startswith("/"):
                    p = parts[5].strip()
                    self.paths.setdefault(os.path.basename(p), p)
        self.roots = {}
        self.aliases = {}

    def path(self, module):
        module = os.path.basename(module)
        return self.paths.get(module)

    def root_ranges(self, module):
        path = self.path(module)
        if path is None:
            return []
        if path not in self.roots:
            self.roots[path] = cfi_undefined_ra(path)
        return self.roots[path]

    def is_root_address(self, module, address):
        return any(lo <= address < hi for lo, hi in self.root_ranges(module))

    def canonical(self, module, name):
        """One name for aliases (symbols of one value): the fewest leading
        underscores, then the shortest."""
        path = self.path(module)
        if path is None:
            return name
        if path not in self.aliases:
            self.aliases[path] = alias_table(path)
        return self.aliases[path].get(name, name)


def run(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, check=False).stdout
    except OSError:
        return ""


def cfi_undefined_ra(path):
    """Address ranges whose CFI row says the return address is undefined
    (readelf prints no rows for an FDE that keeps its CIE's first row)."""
    out, ranges = run(["readelf", "-wF", path]), []
    cie_ra, cie, fde = {}, None, None
    cols, rows = None, []

    def flush():
        if fde is None:
            if cie is not None:
                cie_ra[cie] = rows[0][1] if rows else ""
            return
        lo, hi, ra = fde
        if not rows and ra == "u":
            ranges.append((lo, hi))
        for i, (loc, r) in enumerate(rows):
            if r == "u":
                ranges.append((loc, rows[i + 1][0] if i + 1 < len(rows) else hi))

    for line in out.splitlines():
        m = re.match(r"([0-9a-f]+) [0-9a-f]+ [0-9a-f]+ (CIE|FDE cie=([0-9a-f]+) pc=([0-9a-f]+)\.\.([0-9a-f]+))", line)
        if m:
            flush()
            rows, cols = [], None
            if m.group(2) == "CIE":
                cie, fde = m.group(1), None
            else:
                fde = (int(m.group(4), 16), int(m.group(5), 16), cie_ra.get(m.group(3), ""))
            continue
        f = line.split()
        if f and f[0] == "LOC":
            cols = f
            continue
        if cols and f and re.fullmatch(r"[0-9a-f]{8,16}", f[0]) and "ra" in cols:
            i = cols.index("ra")
            rows.append((int(f[0], 16), f[i] if i < len(f) else ""))
    flush()
    return ranges


def debug_file(path):
    out = run(["readelf", "-n", path])
    m = re.search(r"Build ID: ([0-9a-f]+)", out)
    if not m:
        return None
    d = "/usr/lib/debug/.build-id/%s/%s.debug" % (m.group(1)[:2], m.group(1)[2:])
    return d if os.path.exists(d) else None


def alias_table(path):
    by_value = {}
    for p in filter(None, [path, debug_file(path)]):
        for line in run(["readelf", "-sW", p]).splitlines():
            f = line.split()
            if len(f) >= 8 and f[3] == "FUNC" and f[6] != "UND":
                by_value.setdefault(int(f[1], 16), set()).add(base_name(f[7]))
    table = {}
    for names in by_value.values():
        best = min(names, key=lambda n: (len(n) - len(n.lstrip("_")), len(n), n))
        for n in names:
            table[n] = best
    return table


def read_agent(path):
    """[(count, [(name, kind, module, address)...] root first)]"""
    stacks = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            count, _, frames = line.partition("\t")
            if not count.isdigit():
                continue  # not a stack line
            out, prev = [], None
            for fr in frames.split("\x1e"):
                name, kind, module, addr = (fr.split("\x1f") + ["", "", "", ""])[:4]
                key = (module, addr)
                if kind == "0" and key == prev:
                    continue  # inlined into the frame before it
                prev = key
                out.append((name, int(kind) if kind.isdigit() else 2, module,
                            int(addr) if addr.lstrip("-").isdigit() else 0))
            stacks.append((int(count), out))
    return stacks


PERF_FRAME = re.compile(r"^\s+([0-9a-f]+) (.*) \((.*)\)$")


def read_perf(path):
    """The same shape from perf script's output (leaf-first chains)."""
    stacks, cur = [], None
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = PERF_FRAME.match(line.rstrip("\n"))
            if m:
                ip, sym, dso = int(m.group(1), 16), m.group(2), m.group(3)
                kernel = dso.startswith("[kernel") or dso.endswith(".ko") or "[bpf" in dso
                if sym == "[unknown]":
                    frame = ("[unknown]", 1 if kernel else 2, os.path.basename(dso), ip)
                else:
                    frame = (base_name(sym), 1 if kernel else 0, os.path.basename(dso), ip)
                if cur is not None:
                    cur.append(frame)
            elif line.strip():
                if cur is not None:
                    stacks.append((1, cur[::-1]))
                cur = []
    if cur is not None:
        stacks.append((1, cur[::-1]))
    # perf prints a caller's frame at its return address - 1 (inside the
    # call instruction), as the agent stores it: no adjustment needed
    return stacks


def function_key(mods, name, kind, module):
    if kind == 1:
        return name + " [k]"
    if kind == 2 or name == "[unknown]" or name.startswith(module + "+0x"):
        return "[unknown] (%s)" % module if module else "[unknown]"
    return mods.canonical(module, base_name(name))


def analyze(mods, stacks):
    total = user = complete = 0
    incl, cut_roots = {}, {}
    for count, frames in stacks:
        total += count
        ufr = [f for f in frames if f[1] != 1 and f[0] != "[no stack]"]
        if ufr:
            user += count
            name, kind, module, addr = ufr[0]
            names = {base_name(name), mods.canonical(module, base_name(name))}
            if names & ROOT_NAMES or mods.is_root_address(module, addr):
                complete += count
            else:
                k = function_key(mods, name, kind, module)
                cut_roots[k] = cut_roots.get(k, 0) + count
        for k in {function_key(mods, *f[:3]) for f in frames if f[0] != "[no stack]"}:
            incl[k] = incl.get(k, 0) + count
    pct = lambda n, d: 100.0 * n / d if d else 0.0
    return {"samples": total, "user_stacks": user,
            "completeness": pct(complete, user),
            "shares": {k: pct(v, total) for k, v in incl.items()},
            "cut_roots": sorted(((pct(v, user), k) for k, v in cut_roots.items()), reverse=True)[:5]}


def table(name, a, p):
    lines = ["", "### %s" % name, ""]
    lines.append("| | traceprof | perf --call-graph dwarf |")
    lines.append("|---|---:|---:|")
    lines.append("| samples (user stacks) | %d (%d) | %s |" % (
        a["samples"], a["user_stacks"],
        "%d (%d)" % (p["samples"], p["user_stacks"]) if p else "-"))
    lines.append("| completeness | %.1f %% | %s |" % (
        a["completeness"], "%.1f %%" % p["completeness"] if p else "-"))
    if a["cut_roots"]:
        lines.append("")
        lines.append("traceprof's cut stacks end at: " + ", ".join(
            "`%s` %.0f %%" % (k, v) for v, k in a["cut_roots"][:3]))
    if p:
        keys = [k for k in set(a["shares"]) | set(p["shares"])
                if max(a["shares"].get(k, 0), p["shares"].get(k, 0)) > SHOW_SHARE]
        keys.sort(key=lambda k: -max(a["shares"].get(k, 0), p["shares"].get(k, 0)))
        flagged = 0
        lines += ["", "| function | traceprof % | perf % | diff (pts) | |", "|---|---:|---:|---:|---|"]
        for k in keys:
            x, y = a["shares"].get(k, 0.0), p["shares"].get(k, 0.0)
            flag = abs(x - y) > FLAG_POINTS
            flagged += flag
            lines.append("| `%s` | %.1f | %.1f | %+.1f | %s |" % (k, x, y, x - y, "**>2**" if flag else ""))
        lines.append("")
        lines.append("%d of %d functions over %.0f %% differ by more than %.0f points." % (
            flagged, len(keys), SHOW_SHARE, FLAG_POINTS))
    return "\n".join(lines)


def cmd_run(args):
    opts = dict(zip(args[0::2], args[1::2]))
    mods = Modules(opts["--maps"])
    a = analyze(mods, read_agent(opts["--agent"]))
    p = analyze(mods, read_perf(opts["--perf"])) if opts.get("--perf") else None
    print(table(opts["--name"], a, p))
    if opts.get("--json"):
        with open(opts["--json"], "w") as f:
            json.dump({"name": opts["--name"], "agent": a, "perf": p}, f)


def cmd_summary(files):
    runs = {}
    for path in files:
        with open(path) as f:
            r = json.load(f)
        runs.setdefault(r["name"], []).append(r)
    med = lambda xs: statistics.median(xs) if xs else float("nan")
    print("| workload | runs | traceprof completeness | perf completeness | functions > 2 % | differing > 2 pts |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, rs in runs.items():
        a = [r["agent"]["completeness"] for r in rs]
        p = [r["perf"]["completeness"] for r in rs if r["perf"]]
        nk, nd = [], []
        for r in rs:
            if not r["perf"]:
                continue
            sa, sp = r["agent"]["shares"], r["perf"]["shares"]
            keys = [k for k in set(sa) | set(sp) if max(sa.get(k, 0), sp.get(k, 0)) > SHOW_SHARE]
            nk.append(len(keys))
            nd.append(sum(abs(sa.get(k, 0) - sp.get(k, 0)) > FLAG_POINTS for k in keys))
        print("| %s | %d | %.1f %% (%.1f–%.1f) | %s | %s | %s |" % (
            name, len(rs), med(a), min(a), max(a),
            "%.1f %% (%.1f–%.1f)" % (med(p), min(p), max(p)) if p else "-",
            "%g" % med(nk) if nk else "-", "%g" % med(nd) if nd else "-"))


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in ("run", "summary"):
        sys.exit(__doc__)
    if sys.argv[1] == "run":
        cmd_run(sys.argv[2:])
    else:
        cmd_summary(sys.argv[2:])


if __name__ == "__main__":
    main()
