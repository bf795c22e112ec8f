"""Checks the names of py_churn.py's frames in e2e_agent_python's stacks.

usage: python3 py_churn_check.py STACKS.tsv

Every frame whose file is moda.py, modb.py or modb_gen must carry one of
the names its code has (module.qualname, written out by hand below): a
frame named with another module's name, or a function its file does not
have, fails. Prints the counts; exits 1 on a wrong name or too few
frames.
"""
import sys

NAMES = {
    "moda.py": {"moda." + q for q in (
        "<module>", "lam", "lam.<locals>.<lambda>", "lam.<locals>.<genexpr>",
        "closure_maker", "closure_maker.<locals>.inner", "run", "run.<locals>.<genexpr>")},
    "modb.py": {"modb." + q for q in (
        "<module>", "churn", "churn.<locals>.<lambda>", "churn.<locals>.per_call",
        "churn.<locals>.<genexpr>")},
    "modb_gen": {"modb.made", "modb.<module>"},
}

right = wrong = 0
seen = {}
for line in open(sys.argv[1]):
    n, frames = line.rstrip("\n").split("\t", 1)
    for f in frames.split("\x1e"):
        name, module, _ = f.split("\x1f")
        if module not in NAMES:
            continue
        if name in NAMES[module]:
            right += int(n)
        else:
            wrong += int(n)
            seen[(module, name)] = seen.get((module, name), 0) + int(n)
print("churn: %d frames named right, %d wrong" % (right, wrong))
for (module, name), n in sorted(seen.items()):
    print("  wrong: %s in %s (%d)" % (name, module, n))
if wrong or right < 500:
    print("FAIL: short-lived functions named wrong, or too few sampled")
    sys.exit(1)
