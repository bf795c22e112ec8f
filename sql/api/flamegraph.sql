-- flamegraph.sql: _flamegraph_arrays, _flamegraph (taken from migration 004).

-- Flame graph rows from folded stacks and their weights (aligned arrays):
-- the nested set that Grafana's flame graph panel reads. One root "total"
-- at level 0; a node's children follow it (depth-first pre-order), siblings
-- sorted by label (byte order); value = own weight + children's values,
-- self = own weight. _flamegraph_arrays returns the rows' columns as arrays
-- in that order; _flamegraph streams them as rows (RETURN QUERY from
-- PL/pgSQL would copy them into a tuplestore first).
--
-- The stacks are sorted as label arrays, so the stacks under a node are
-- adjacent. (They are sorted as strings with byte 0x01 in place of ';',
-- which gives the same order at a third of the cost; labels must not
-- contain ';' or 0x01, which _frame_label sees to.) One pass keeps the path
-- of open nodes: a stack closes the nodes
-- it leaves and opens its new ones. With cum the weight of the stacks seen
-- so far, a node's value is cum at its close minus cum at its open. The
-- nodes one stack opens are consecutive rows and share that opening cum,
-- so the open path is kept as a few segments (first depth, row offset,
-- cum), and a node costs two array writes when opened and one when closed.
CREATE OR REPLACE FUNCTION traceprof._flamegraph_arrays(stacks text[], weights bigint[],
                                             OUT levels integer[], OUT vals bigint[],
                                             OUT selfs bigint[], OUT labels text[])
LANGUAGE plpgsql STABLE AS $$
DECLARE
    st record;
    fr text[];                       -- the current stack's labels
    n integer;                       -- its frames
    c integer;                       -- frames it shares with the open path
    k integer := 0;                  -- depth of the open path
    lo integer;
    b integer;
    v bigint;
    rows integer := 1;               -- output rows so far; row 1 is the root
    cum bigint := 0;                 -- weight of the stacks seen so far
    path text[] := '{}';             -- labels of the open path, by depth
    m integer := 0;                  -- segments of the open path
    seg_lo integer[] := '{}';        -- first depth of a segment
    seg_base integer[] := '{}';      -- row of depth d in it: seg_base + d
    seg_cum bigint[] := '{}';        -- cum when it was opened
    o_level integer[] := '{0}';
    o_value bigint[] := '{0}';
    o_self bigint[] := '{0}';        -- NULL or missing: no own weight
    o_label text[] := '{total}';
BEGIN
    FOR st IN
        SELECT string_to_array(u.s, ';') AS fr, u.w
          FROM unnest(stacks, weights) AS u(s, w)
         WHERE u.s IS NOT NULL AND u.w IS NOT NULL
         ORDER BY replace(u.s, ';', E'\x01') COLLATE "C"
    LOOP
        fr := st.fr;
        n := cardinality(fr);
        c := 0;
        WHILE c < k AND c < n AND fr[c + 1] = path[c + 1] LOOP
            c := c + 1;
        END LOOP;
        WHILE k > c LOOP                     -- close the nodes the stack leaves
            lo := greatest(seg_lo[m], c + 1);
            b := seg_base[m];
            v := cum - seg_cum[m];
            FOR d IN lo .. k LOOP
                o_value[b + d] := v;
            END LOOP;
            IF lo = seg_lo[m] THEN
                m := m - 1;
            END IF;
            k := lo - 1;
        END LOOP;
        IF n > c THEN                        -- open its new ones
            m := m + 1;
            seg_lo[m] := c + 1;
            seg_base[m] := rows - c;
            seg_cum[m] := cum;
            FOR d IN c + 1 .. n LOOP
                o_level[rows - c + d] := d;
                o_label[rows - c + d] := fr[d];
            END LOOP;
            rows := rows + n - c;
        END IF;
        k := n;
        path := fr;
        b := CASE WHEN n = 0 THEN 1 ELSE seg_base[m] + n END;  -- an empty stack is the root's own
        o_self[b] := coalesce(o_self[b], 0) + st.w;
        cum := cum + st.w;
    END LOOP;
    IF NOT FOUND THEN                        -- no stacks: NULLs, no rows
        RETURN;
    END IF;
    WHILE m > 0 LOOP
        FOR d IN seg_lo[m] .. k LOOP
            o_value[seg_base[m] + d] := cum - seg_cum[m];
        END LOOP;
        k := seg_lo[m] - 1;
        m := m - 1;
    END LOOP;
    o_value[1] := cum;
    levels := o_level;
    vals := o_value;
    selfs := o_self;
    labels := o_label;
END $$;

-- Set-returning functions in the select list stream their rows; in FROM
-- each would be copied into a tuplestore first.
CREATE OR REPLACE FUNCTION traceprof._flamegraph(stacks text[], weights bigint[])
RETURNS TABLE (level integer, value bigint, self bigint, label text)
LANGUAGE sql STABLE AS $$
    SELECT x.level, x.value, coalesce(x.self, 0), x.label
      FROM (SELECT unnest(g.levels) AS level, unnest(g.vals) AS value,
                   unnest(g.selfs) AS self, unnest(g.labels) AS label
              FROM traceprof._flamegraph_arrays($1, $2) g) x
$$;
