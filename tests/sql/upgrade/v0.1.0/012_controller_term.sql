-- 012: the controller's term, a fencing token that only grows.
--
-- A controller replica that becomes leader (it took the Lease) takes a new
-- term from a sequence and records it as the current one. Every pass of the
-- leader over the trigger table first checks, in its own transaction, that
-- its term is still the current one (SELECT ... FOR SHARE, so a newer
-- leader taking its term waits for that transaction to end): a replica that
-- was frozen past its Lease and wakes up believing it leads finds a newer
-- term there and writes nothing. The term also goes to the agents with the
-- desired set (fencing_token), and an agent refuses a set whose term is
-- older than the newest it applied.
CREATE SEQUENCE IF NOT EXISTS traceprof.controller_terms;

CREATE TABLE IF NOT EXISTS traceprof.controller_leader (
    one      boolean PRIMARY KEY DEFAULT true CHECK (one),  -- a single row
    term     bigint NOT NULL,                               -- the current term
    identity text NOT NULL,                                 -- the replica holding it
    since    timestamptz NOT NULL DEFAULT now()             -- when it took it
);

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

REVOKE ALL ON FUNCTION traceprof.controller_take_term(text), traceprof.controller_term() FROM PUBLIC;
DO $$
BEGIN
    -- not the reader's default EXECUTE (010): a new term, or a held lock on the term, stops
    -- the leader
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'traceprof_reader') THEN
        REVOKE EXECUTE ON FUNCTION traceprof.controller_take_term(text), traceprof.controller_term()
            FROM traceprof_reader;
    END IF;
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'traceprof_controller') THEN
        GRANT EXECUTE ON FUNCTION traceprof.controller_take_term(text), traceprof.controller_term()
            TO traceprof_controller;
    END IF;
END $$;
