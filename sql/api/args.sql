-- args.sql: _arg_required, _arg_service, _arg_trace, _arg_range (taken from migration 004).

-- Returns value, or raises an error naming fn and param when it is NULL or
-- empty.
CREATE OR REPLACE FUNCTION traceprof._arg_required(value text, fn text, param text) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    IF value IS NULL OR value = '' THEN
        RAISE EXCEPTION '%: % must not be null or empty', fn, param
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN value;
END $$;

-- An optional service filter: NULL means every service; '' is refused
-- rather than silently matching nothing.
CREATE OR REPLACE FUNCTION traceprof._arg_service(value text, fn text) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    IF value = '' THEN
        RAISE EXCEPTION '%: service must not be empty', fn
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'pass NULL for every service';
    END IF;
    RETURN value;
END $$;

-- A required trace id in text form, parsed (the parse error quotes it).
CREATE OR REPLACE FUNCTION traceprof._arg_trace(value text, fn text) RETURNS uuid
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT traceprof.parse_trace_id(traceprof._arg_required($1, $2, 'trace_id'))
$$;

-- Checks a time range [from_time, until_time).
CREATE OR REPLACE FUNCTION traceprof._arg_range(from_time timestamptz, until_time timestamptz, fn text)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
BEGIN
    IF from_time IS NULL THEN
        RAISE EXCEPTION '%: from_time must not be null', fn USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF until_time IS NULL THEN
        RAISE EXCEPTION '%: until_time must not be null', fn USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF until_time <= from_time THEN
        RAISE EXCEPTION '%: until_time % is not after from_time %', fn, until_time, from_time
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END $$;
