-- ids.sql: parse_trace_id, trace_id_text, parse_span_id, span_id_text (taken from migration 002).

-- Trace ids: 32 hex digits, not all zero (W3C trace context). Anything else
-- is an error that quotes the input.
CREATE OR REPLACE FUNCTION traceprof.parse_trace_id(t text) RETURNS uuid
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
BEGIN
    IF t !~ '^[0-9a-fA-F]{32}$' THEN
        RAISE EXCEPTION 'invalid trace id "%": expected 32 hexadecimal digits', left(t, 80)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF t ~ '^0{32}$' THEN
        RAISE EXCEPTION 'invalid trace id "%": all zeros', t
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN t::uuid;
END $$;

CREATE OR REPLACE FUNCTION traceprof.trace_id_text(id uuid) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$ SELECT replace(id::text, '-', '') $$;

CREATE OR REPLACE FUNCTION traceprof.parse_span_id(t text) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
BEGIN
    IF t !~ '^[0-9a-fA-F]{16}$' OR t ~ '^0{16}$' THEN
        RAISE EXCEPTION 'invalid span id "%": expected 16 hexadecimal digits, not all zero', left(t, 80)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN ('x' || t)::bit(64)::bigint;
END $$;

CREATE OR REPLACE FUNCTION traceprof.span_id_text(id bigint) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$ SELECT lpad(to_hex(id), 16, '0') $$;

-- The controller writes and reads trace ids of the trigger table.
GRANT EXECUTE ON FUNCTION traceprof.trace_id_text(uuid), traceprof.parse_trace_id(text)
    TO traceprof_controller;
