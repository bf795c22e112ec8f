# Shared by bench/unwind_completeness.sh and the unwind_completeness test
# (sourced): the stored stacks of one service in the form unwind_stats.py
# reads, and the data xz compresses.

# unwind_dump CONN SERVICE OUT: every stored stack of SERVICE (all of the
# database's samples) with its number of samples, frames root first
unwind_dump() {
	psql "$1" -qXAt -v ON_ERROR_STOP=1 -F $'\t' -v svc="$2" >"$3" <<'SQL'
WITH u AS (
    SELECT x.stack_id, sum(coalesce(x.c, 1)) AS n
      FROM traceprof.samples s
      JOIN traceprof.sources so ON so.source_id = s.source_id
     CROSS JOIN LATERAL unnest(s.stacks, s.counts) AS x(stack_id, c)
     WHERE so.service = :'svc'
     GROUP BY x.stack_id)
SELECT u.n, string_agg(coalesce(fn.name, '[unknown]') || chr(31) || coalesce(fn.kind, 2) || chr(31)
                       || coalesce(fn.module, '') || chr(31) || coalesce(fr.address, 0), chr(30)
                       ORDER BY f.ord)
  FROM u
  JOIN traceprof.stacks st ON st.stack_id = u.stack_id
 CROSS JOIN LATERAL unnest(st.frame_ids) WITH ORDINALITY AS f(frame_id, ord)
  LEFT JOIN traceprof.frames fr ON fr.frame_id = f.frame_id
  LEFT JOIN traceprof.functions fn ON fn.function_id = fr.function_id
 GROUP BY u.stack_id, u.n;
SQL
}

# unwind_xz_data FILE MB: MB megabytes of text that xz -9 compresses about
# 3:1 (words of a fixed vocabulary and numbers; the same bytes every time)
unwind_xz_data() {
	/usr/bin/python3 - "$1" "$2" <<'PY'
import random, sys
r = random.Random(25)
words = ["".join(r.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(r.randint(3, 10)))
         for _ in range(5000)]
out, n, limit = [], 0, int(sys.argv[2]) << 20
while n < limit:
    line = " ".join(r.choice(words) for _ in range(12)) + " %d\n" % r.randint(0, 10**9)
    out.append(line)
    n += len(line)
open(sys.argv[1], "w").write("".join(out))
PY
}
