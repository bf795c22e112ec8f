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

-- controller_take_term() and controller_term(), with their grants: sql/api/controller_term.sql.
