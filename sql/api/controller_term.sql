-- controller_term.sql: controller_take_term, controller_term (taken from migration 012).

-- Takes a new term for identity and makes it the current one; returns it.
-- The controller role calls both functions; they run with the owner's
-- rights, so it needs no privilege on the table or the sequence.
CREATE OR REPLACE FUNCTION traceprof.controller_take_term(identity text) RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
INSERT INTO traceprof.controller_leader AS l (one, term, identity, since)
VALUES (true, nextval('traceprof.controller_terms'), left(identity, 256), now())
ON CONFLICT (one) DO UPDATE SET term = excluded.term, identity = excluded.identity,
                                since = excluded.since
RETURNING term
$$;

-- The current term, its row locked FOR SHARE until the caller's
-- transaction ends (a newer leader's controller_take_term waits for it).
CREATE OR REPLACE FUNCTION traceprof.controller_term() RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
SELECT term FROM traceprof.controller_leader FOR SHARE
$$;

-- The controller's only: not the reader's default EXECUTE (010), since a
-- new term, or a held lock on the term, stops the leader.
REVOKE ALL ON FUNCTION traceprof.controller_take_term(text), traceprof.controller_term() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION traceprof.controller_take_term(text), traceprof.controller_term()
    FROM traceprof_reader;
GRANT EXECUTE ON FUNCTION traceprof.controller_take_term(text), traceprof.controller_term()
    TO traceprof_controller;
