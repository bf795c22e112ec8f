-- cohort_spec.sql: _cohort_duration_us, _cohort_statuses, glob_to_like, _cohort_strings, parse_cohort (taken from migrations 005, 011).

-- A duration value: a JSON number of milliseconds or a string such as
-- "250us", "100ms", "1.5s", "2m". Returns microseconds, rounded up (a
-- duration in whole microseconds is >= x exactly when it is >= ceil(x),
-- and < x exactly when it is < ceil(x)).
CREATE OR REPLACE FUNCTION traceprof._cohort_duration_us(v jsonb, key text, cohort text) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    m text[];
    ms numeric;
BEGIN
    IF jsonb_typeof(v) = 'number' THEN
        ms := (v #>> '{}')::numeric;
    ELSIF jsonb_typeof(v) = 'string' THEN
        m := regexp_match(v #>> '{}', '^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*(us|µs|ms|s|m|min|h)?\s*$');
        IF m IS NOT NULL THEN
            ms := m[1]::numeric * CASE coalesce(m[2], 'ms')
                WHEN 'us' THEN 0.001 WHEN 'µs' THEN 0.001 WHEN 'ms' THEN 1
                WHEN 's' THEN 1000 WHEN 'm' THEN 60000 WHEN 'min' THEN 60000
                WHEN 'h' THEN 3600000 END;
        END IF;
    END IF;
    IF ms IS NULL OR ms < 0 OR ms > 1e12 THEN
        RAISE EXCEPTION 'invalid duration "%" for % in %',
            left(coalesce(v #>> '{}', 'null'), 80), key, cohort
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'a duration is a number of milliseconds or a string such as "250us", "100ms", "1.5s" or "2m"';
    END IF;
    RETURN ceil(ms * 1000)::bigint;
END $$;

-- A status value: "5xx", "404", "4xx,5xx", a JSON number, or an array of
-- those. Returns the matching codes as a multirange.
CREATE OR REPLACE FUNCTION traceprof._cohort_statuses(v jsonb, cohort text) RETURNS int4multirange
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    items text[] := '{}';
    item text;
    e jsonb;
    code integer;
    result int4multirange := '{}';
BEGIN
    FOR e IN SELECT x FROM jsonb_array_elements(CASE WHEN jsonb_typeof(v) = 'array' THEN v
                                                     ELSE jsonb_build_array(v) END) x LOOP
        IF jsonb_typeof(e) = 'string' THEN
            items := items || string_to_array(e #>> '{}', ',');
        ELSE
            items := items || e::text;  -- a number; anything else fails below
        END IF;
    END LOOP;
    IF cardinality(items) = 0 THEN  -- "" or []
        items := ARRAY[CASE WHEN jsonb_typeof(v) = 'string' THEN v #>> '{}' ELSE v::text END];
    END IF;
    FOREACH item IN ARRAY items LOOP
        item := lower(btrim(item));
        IF item ~ '^[1-5]xx$' THEN
            code := left(item, 1)::integer * 100;
            result := result + int4multirange(int4range(code, code + 100));
        ELSIF item ~ '^[1-5][0-9][0-9]$' THEN
            result := result + int4multirange(int4range(item::integer, item::integer + 1));
        ELSE
            RAISE EXCEPTION 'invalid status "%" for status in %', left(item, 80), cohort
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'a status is a code such as 404 or "404", a class such as "5xx", a comma-separated list such as "4xx,5xx", or an array of those';
        END IF;
    END LOOP;
    RETURN result;
END $$;

-- A route glob: * matches any run of characters, ? one character, a
-- backslash makes the next character literal (a trailing backslash is a
-- literal backslash); everything else, % and _ included, is literal.
-- Returns the equivalent LIKE pattern. The pattern is tokenized once and
-- the pieces joined with string_agg, linear in its length (appending one
-- character at a time copied the whole value each time: a 1 MiB pattern
-- took more than 15 s of a backend).
CREATE OR REPLACE FUNCTION traceprof.glob_to_like(glob text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
SELECT coalesce(string_agg(
           CASE
               WHEN m.t = '\' THEN '\\'
               WHEN length(m.t) = 2 THEN
                   CASE WHEN right(m.t, 1) IN ('\', '%', '_') THEN m.t ELSE right(m.t, 1) END
               WHEN m.t = '*' THEN '%'
               WHEN m.t = '?' THEN '_'
               WHEN m.t IN ('%', '_') THEN '\' || m.t
               ELSE m.t
           END, '' ORDER BY m.n), '')
  FROM regexp_matches(glob, '\\.|\\$|.', 'g') WITH ORDINALITY AS r(a, n),
       LATERAL (SELECT r.a[1] AS t, r.n) m
$$;

-- A string or an array of strings; anything else is an error naming key.
CREATE OR REPLACE FUNCTION traceprof._cohort_strings(v jsonb, key text, what text, cohort text) RETURNS text[]
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF jsonb_typeof(v) = 'string' THEN
        RETURN ARRAY[v #>> '{}'];
    END IF;
    IF jsonb_typeof(v) = 'array' AND jsonb_array_length(v) > 0
       AND NOT EXISTS (SELECT FROM jsonb_array_elements(v) x WHERE jsonb_typeof(x) <> 'string') THEN
        RETURN ARRAY(SELECT x #>> '{}' FROM jsonb_array_elements(v) x);
    END IF;
    RAISE EXCEPTION 'invalid % % for % in %', what, left(v::text, 80), key, cohort
        USING ERRCODE = 'invalid_parameter_value',
              HINT = format('%s is a string or an array of strings', key);
END $$;

-- Parses one cohort spec; cohort names it in error messages ("cohort_a").
CREATE OR REPLACE FUNCTION traceprof.parse_cohort(spec jsonb, cohort text DEFAULT 'cohort')
RETURNS traceprof.cohort_filter
LANGUAGE plpgsql STABLE AS $$
DECLARE
    f traceprof.cohort_filter;
    k text;
    patterns text[];
    methods text[];
BEGIN
    IF spec IS NULL OR jsonb_typeof(spec) <> 'object' THEN
        RAISE EXCEPTION '% must be a JSON object, not %', cohort, coalesce(left(spec::text, 80), 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'use ''{}'' for all requests, or keys such as {"min_duration": "1s", "status": "5xx"}';
    END IF;
    FOR k IN SELECT jsonb_object_keys(spec) LOOP
        IF k NOT IN ('min_duration', 'max_duration', 'status', 'route', 'method') THEN
            RAISE EXCEPTION 'unknown cohort key "%" in %', left(k, 80), cohort
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'cohort keys are min_duration, max_duration, status, route and method';
        END IF;
    END LOOP;
    -- A JSON null means the key is not set.
    spec := jsonb_strip_nulls(spec);
    IF spec ? 'min_duration' THEN
        f.min_us := traceprof._cohort_duration_us(spec -> 'min_duration', 'min_duration', cohort);
    END IF;
    IF spec ? 'max_duration' THEN
        f.max_us := traceprof._cohort_duration_us(spec -> 'max_duration', 'max_duration', cohort);
    END IF;
    IF f.min_us >= f.max_us THEN
        RAISE EXCEPTION 'min_duration "%" is not below max_duration "%" in %',
            left(spec ->> 'min_duration', 80), left(spec ->> 'max_duration', 80), cohort
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'min_duration is inclusive and max_duration exclusive, so min_duration must be the smaller';
    END IF;
    IF spec ? 'status' THEN
        f.statuses := traceprof._cohort_statuses(spec -> 'status', cohort);
    END IF;
    IF spec ? 'route' THEN
        SELECT array_agg(traceprof.glob_to_like(g))
          INTO patterns
          FROM unnest(traceprof._cohort_strings(spec -> 'route', 'route', 'route pattern', cohort)) g;
    END IF;
    IF spec ? 'method' THEN
        SELECT array_agg(upper(m))
          INTO methods
          FROM unnest(traceprof._cohort_strings(spec -> 'method', 'method', 'method', cohort)) m;
    END IF;
    IF patterns IS NOT NULL OR methods IS NOT NULL THEN
        -- route_id 0 is the request without a route: method '' and route ''.
        SELECT coalesce(array_agg(r.route_id), '{}')
          INTO f.route_ids
          FROM (SELECT rt.route_id, rt.method, rt.route FROM traceprof.routes rt
                UNION ALL
                SELECT 0, '', '' WHERE NOT EXISTS (SELECT FROM traceprof.routes WHERE route_id = 0)) r
         WHERE (patterns IS NULL OR r.route LIKE ANY (patterns))
           AND (methods IS NULL OR upper(r.method) = ANY (methods));
    END IF;
    RETURN f;
END $$;
