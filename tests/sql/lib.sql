-- Assertion helpers for the SQL tests (schema t, test databases only).
-- Each raises an error naming the check, so psql stops and ctest fails.
CREATE SCHEMA t;

CREATE FUNCTION t.eq(actual anyelement, expected anyelement, what text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF actual IS DISTINCT FROM expected THEN
        RAISE EXCEPTION 'FAIL %: got %, expected %', what, actual, expected;
    END IF;
END $$;

CREATE FUNCTION t.near(actual double precision, expected double precision, tolerance double precision, what text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF actual IS NULL OR abs(actual - expected) > tolerance THEN
        RAISE EXCEPTION 'FAIL %: got %, expected % ± %', what, actual, expected, tolerance;
    END IF;
END $$;

CREATE FUNCTION t.ok(cond boolean, what text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF cond IS NOT TRUE THEN
        RAISE EXCEPTION 'FAIL %', what;
    END IF;
END $$;

-- Runs sql and requires an error whose message matches pattern (a regex).
CREATE FUNCTION t.raises(sql text, pattern text, what text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    msg text;
BEGIN
    BEGIN
        EXECUTE sql;
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT;
        IF msg !~ pattern THEN
            RAISE EXCEPTION 'FAIL %: error "%" does not match /%/', what, msg, pattern;
        END IF;
        RETURN;
    END;
    RAISE EXCEPTION 'FAIL %: no error from: %', what, sql;
END $$;

-- Hex trace id helper for fixtures: t.tid(7) = 000...0007 as uuid.
CREATE FUNCTION t.tid(n bigint) RETURNS uuid
LANGUAGE sql IMMUTABLE AS $$ SELECT lpad(to_hex(n), 32, '0')::uuid $$;
