-- The flame graph builder (traceprof._flamegraph) against a plain reference:
-- group every prefix of every stack (value = weight of the stacks under it,
-- self = weight of the stacks ending there) and list the prefixes in the
-- order of their label arrays, which is depth-first pre-order with siblings
-- sorted by label. Plus the nested-set invariants checked row by row.

-- Checks rows given in output order: one root at level 0, each row at most
-- one level below the previous one, value = self + children's values,
-- siblings in strictly increasing byte order of label.
CREATE FUNCTION t.flamegraph_ok(lv integer[], val bigint[], slf bigint[], lab text[], what text)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    n integer := coalesce(cardinality(lv), 0);
    open_row integer[] := '{}';   -- open row at each depth (1-based: depth + 1)
    child_sum bigint[] := '{}';   -- sum of the children's values of that row
    last_child text[] := '{}';    -- label of its last child
    d integer;
    i integer;
BEGIN
    IF n = 0 THEN
        RETURN;
    END IF;
    IF lv[1] <> 0 OR lab[1] <> 'total' THEN
        RAISE EXCEPTION 'FAIL %: first row is not the root', what;
    END IF;
    FOR i IN 1 .. n + 1 LOOP
        d := CASE WHEN i <= n THEN lv[i] ELSE 0 END;
        IF i > 1 AND i <= n AND (d < 1 OR d > lv[i - 1] + 1) THEN
            RAISE EXCEPTION 'FAIL %: row % jumps from level % to %', what, i, lv[i - 1], d;
        END IF;
        -- close rows at depth >= d
        FOR k IN REVERSE coalesce(cardinality(open_row), 0) - 1 .. d LOOP
            CONTINUE WHEN open_row[k + 1] IS NULL;
            IF val[open_row[k + 1]] <> slf[open_row[k + 1]] + child_sum[k + 1] THEN
                RAISE EXCEPTION 'FAIL %: row % (%) value % <> self % + children %', what, open_row[k + 1],
                    lab[open_row[k + 1]], val[open_row[k + 1]], slf[open_row[k + 1]], child_sum[k + 1];
            END IF;
            IF k > 0 THEN
                child_sum[k] := child_sum[k] + val[open_row[k + 1]];
            END IF;
            open_row[k + 1] := NULL;
        END LOOP;
        EXIT WHEN i > n;
        IF d > 0 THEN
            IF last_child[d] IS NOT NULL AND NOT (last_child[d] < lab[i] COLLATE "C") THEN
                RAISE EXCEPTION 'FAIL %: row % label % does not follow sibling %', what, i, lab[i], last_child[d];
            END IF;
            last_child[d] := lab[i];
        END IF;
        open_row[d + 1] := i;
        child_sum[d + 1] := 0;
        last_child[d + 1] := NULL;
    END LOOP;
END $$;

-- Hand-made cases. "b!" sorts after "b" but its string "a;b!" sorts before
-- "a;b;x": the builder must order by label arrays, not by folded text.
SELECT t.eq((SELECT count(*) FROM traceprof._flamegraph('{}', '{}')), 0::bigint, 'no stacks: no rows');
SELECT t.eq((SELECT string_agg(level || ' ' || label || ' ' || value || ' ' || self, ', ')
               FROM traceprof._flamegraph('{"",a}', '{3,4}')),
            '0 total 7 3, 1 a 4 4', 'an empty stack is the root''s own weight');
SELECT t.eq((SELECT string_agg(level || ' ' || label || ' ' || value || ' ' || self, ', ' ORDER BY i)
               FROM traceprof._flamegraph('{"a;b!","a;b","a;b;x","a;b"}', '{1,2,4,8}')
                    WITH ORDINALITY AS f(level, value, self, label, i)),
            '0 total 15 0, 1 a 15 0, 2 b 14 10, 3 x 4 4, 2 b! 1 1',
            'prefix before extension, duplicates merged, byte order');
SELECT t.eq((SELECT string_agg(level || ' ' || label || ' ' || value || ' ' || self, ', ' ORDER BY i)
               FROM traceprof._flamegraph('{"z","main;f;f;f"}', '{5,7}')
                    WITH ORDINALITY AS f(level, value, self, label, i)),
            '0 total 12 0, 1 main 7 0, 2 f 7 0, 3 f 7 0, 4 f 7 7, 1 z 5 5',
            'recursion is a chain of nodes; roots sorted');

-- Random stacks over a few labels, so prefixes are shared a lot.
SELECT setseed(0.42);
CREATE TEMP TABLE input AS
SELECT i, (SELECT string_agg(l.lbl[1 + floor(random() * cardinality(l.lbl))::int], ';' ORDER BY d)
             FROM generate_series(1, 1 + (i * 7919) % 12) AS d) AS stack,
       1 + floor(random() * 100000)::bigint AS w
  FROM generate_series(1, 3000) AS i,
       (SELECT '{main,a,b,"a b",c,[unknown],Ä,z,"f [m]",""}'::text[] AS lbl) l;

CREATE TEMP TABLE expected AS
WITH s AS (
    SELECT string_to_array(stack, ';') AS fr, w FROM input
), pre AS (
    SELECT s.fr[1:d] AS path, s.w, d = cardinality(s.fr) AS leaf
      FROM s, generate_series(1, cardinality(s.fr)) AS d
)
SELECT path, sum(w)::bigint AS value, coalesce(sum(w) FILTER (WHERE leaf), 0)::bigint AS self FROM pre GROUP BY path
UNION ALL
SELECT '{}', (SELECT sum(w) FROM input)::bigint, (SELECT coalesce(sum(w), 0) FROM input WHERE stack = '')::bigint;

CREATE TEMP TABLE got AS
SELECT f.* FROM (SELECT array_agg(stack) AS s, array_agg(w) AS w FROM input) a,
       traceprof._flamegraph(a.s, a.w) WITH ORDINALITY AS f(level, value, self, label, i);

SELECT t.ok((SELECT count(*) FROM got) > 1000, 'random stacks make a large tree');
SELECT t.eq((SELECT string_agg(level || '|' || label || '|' || value || '|' || self, E'\n' ORDER BY i) FROM got),
            (SELECT string_agg(cardinality(path) || '|' || coalesce(path[cardinality(path)], 'total')
                               || '|' || value || '|' || self, E'\n' ORDER BY path COLLATE "C")
               FROM expected),
            'builder matches the reference row for row');
SELECT t.flamegraph_ok(array_agg(level ORDER BY i), array_agg(value ORDER BY i), array_agg(self ORDER BY i),
                       array_agg(label ORDER BY i), 'random stacks')
  FROM got;
SELECT t.raises($$SELECT t.flamegraph_ok('{0,1,1}', '{3,1,1}', '{0,1,1}', '{total,a,b}', 'broken')$$,
                'value 3 <> self 0 \+ children 2', 'the checker catches a wrong value');
SELECT t.raises($$SELECT t.flamegraph_ok('{0,1,1}', '{2,1,1}', '{0,1,1}', '{total,b,a}', 'broken')$$,
                'does not follow sibling', 'the checker catches unsorted siblings');
