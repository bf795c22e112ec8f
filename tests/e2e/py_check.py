"""Checks e2e_agent_python's stored stacks against py_workload.py's truth.

usage: python3 py_check.py STACKS.tsv TRUTH.txt [--no-interleaving]

--no-interleaving: report, but do not require, the Python frames of a C
extension's callback in their place among the native frames (an
interpreter whose evaluation loop the agent cannot find in the native
stack: docs/python.md, "Versions").

STACKS.tsv: one stored stack a line, "samples<TAB>frames" with the frames
root first, separated by \\x1e, each "function\\x1fmodule\\x1fline".
Prints the figures and "FAIL: ..." for each check that does not hold;
exits 1 when one does not.
"""
import collections
import sys

stacks = []
for line in open(sys.argv[1]):
    n, frames = line.rstrip("\n").split("\t", 1)
    fr = [tuple(f.split("\x1f")) for f in frames.split("\x1e")]
    stacks.append((int(n), [(f[0], f[1], int(f[2] or 0)) for f in fr]))
truth, hot = {}, None
for line in open(sys.argv[2]):
    w = line.split()
    if w[0] == "TRUTH":
        truth[w[1]] = float(w[2])
    elif w[0] == "LINES":
        hot = (int(w[1]), int(w[2]))

fails = []
total = sum(n for n, _ in stacks)
py = lambda f: f[1].endswith(".py")
with_py = sum(n for n, fr in stacks if any(py(f) for f in fr))
print("samples %d, with a Python frame %d (%.2f %%)" % (total, with_py, 100.0 * with_py / max(total, 1)))
if total < 1000:
    fails.append("only %d samples" % total)
if with_py < 0.99 * total:
    fails.append("%.2f %% of samples with a Python frame (99 %% needed)" % (100.0 * with_py / total))

# inclusive shares per thread: samples whose stack holds the function, over the
# samples of its thread (main_loop's or worker's), against the thread's CPU time
def share(fn, root):
    mine = [(n, {f[0] for f in fr}) for n, fr in stacks if any(f[0] == root for f in fr)]
    all_n = sum(n for n, _ in mine)
    return sum(n for n, names in mine if "__main__." + fn in names) / max(all_n, 1), all_n

print("function         truth %   sampled %   diff   (of its thread's samples)")
for fn, root, thread in (("burn_a", "__main__.main_loop", "main_thread"),
                         ("recurse", "__main__.main_loop", "main_thread"),
                         ("via_json", "__main__.main_loop", "main_thread"),
                         ("json_cb", "__main__.main_loop", "main_thread"),
                         ("worker_hash", "__main__.worker", "worker_thread")):
    got, n_thread = share(fn, root)
    want = truth[fn] / truth[thread]
    print("%-16s %7.2f   %9.2f   %+5.2f   (%d)" % (fn, 100 * want, 100 * got, 100 * (got - want),
                                                   n_thread))
    if n_thread < 500 or abs(got - want) > 0.02:
        fails.append("%s: inclusive share %.2f %% of %d samples, truth %.2f %%"
                     % (fn, 100 * got, n_thread, 100 * want))

# the hot line: burn_a as the innermost Python frame, on its loop's lines
lines = collections.Counter()
for n, fr in stacks:
    pyf = [f for f in fr if py(f)]
    if pyf and pyf[-1][0] == "__main__.burn_a":
        lines[pyf[-1][2]] += n
on = sum(c for l, c in lines.items() if hot[0] <= l <= hot[1])
print("burn_a's innermost lines: %s (loop: %d-%d)" % (dict(lines.most_common(4)), hot[0], hot[1]))
if not lines or on < 0.95 * sum(lines.values()):
    fails.append("burn_a's samples on its loop lines: %d of %d" % (on, sum(lines.values())))

# interleaving: json_cb runs under the C encoder, which runs under via_json
cb = [(n, fr) for n, fr in stacks if any(f[0] == "__main__.json_cb" for f in fr)]
ordered = 0
for n, fr in cb:
    names = [f[0] for f in fr]
    i, j = names.index("__main__.via_json") if "__main__.via_json" in names else -1, names.index("__main__.json_cb")
    if 0 <= i < j and any(not py(f) for f in fr[i + 1:j]):
        ordered += n
ncb = sum(n for n, _ in cb)
print("json_cb samples with via_json, then native frames, then json_cb: %d of %d" % (ordered, ncb))
if ncb == 0 or (ordered < 0.95 * ncb and "--no-interleaving" not in sys.argv[3:]):
    fails.append("interleaving: %d of %d json_cb samples in order" % (ordered, ncb))
# of the workload's own threads (a process churning generators, beside it,
# is often sampled while a generator's loop enters or leaves, when its
# native frame is there and its Python frame not yet or no longer)
mine = [(n, fr) for n, fr in stacks
        if any(f[0] in ("__main__.main_loop", "__main__.worker") for f in fr)]
left = sum(n for n, fr in mine if any(f[0] == "_PyEval_EvalFrameDefault" for f in fr))
print("workload samples still showing _PyEval_EvalFrameDefault: %d" % left)
if left > 0.01 * sum(n for n, _ in mine):
    fails.append("%d samples keep the evaluation loop's native frame" % left)
    for n, fr in sorted(mine, key=lambda x: -x[0])[:200]:
        if any(f[0] == "_PyEval_EvalFrameDefault" for f in fr):
            print("  kept (%d): %s" % (n, ";".join(f[0] for f in fr)))

# recursion: burn_b under recurse 6 times (recurse(5) .. recurse(0))
depth = collections.Counter()
for n, fr in stacks:
    if any(f[0] == "__main__.burn_b" for f in fr):
        depth[sum(1 for f in fr if f[0] == "__main__.recurse")] += n
print("recurse frames above burn_b: %s" % dict(depth))
if not depth or depth[6] < 0.95 * sum(depth.values()):
    fails.append("recursion: %s" % dict(depth))

for f in fails:
    print("FAIL: " + f)
sys.exit(1 if fails else 0)
