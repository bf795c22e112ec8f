-- function_profile.sql: _function_profile (taken from migration 004).

-- Per function of the given stacks: self and total samples and CPU ms, and
-- the percentages of all the CPU of the given stacks. Inputs are aligned
-- arrays (one entry per stack id).
--
-- Expanding stacks into functions is the costly step. When every stack has
-- the same CPU per sample (one frequency, the common case) the sample counts
-- follow from the CPU weights and one expansion does; otherwise (19 Hz and
-- 99 Hz samples mixed) samples and CPU are expanded separately.
CREATE OR REPLACE FUNCTION traceprof._function_profile(stack_ids bigint[], samples bigint[], cpu_ms double precision[])
RETURNS TABLE (function_id bigint, function text, module text,
               self_samples bigint, total_samples bigint,
               self_cpu_ms double precision, total_cpu_ms double precision,
               self_pct double precision, total_pct double precision)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
DECLARE
    total_ms double precision;
    ms_per_sample double precision;
    lo double precision;
    hi double precision;
BEGIN
    SELECT sum(u.ms), sum(u.ms) / sum(u.n), min(u.ms / u.n), max(u.ms / u.n)
      INTO total_ms, ms_per_sample, lo, hi
      FROM unnest(samples, cpu_ms) AS u(n, ms)
     WHERE u.n > 0;
    IF total_ms IS NULL OR total_ms <= 0 THEN
        RETURN;
    END IF;
    IF hi - lo <= 1e-9 * hi THEN
        RETURN QUERY
        SELECT w.function_id, coalesce(f.name, '[unknown]'), coalesce(f.module, ''),
               round(w.self_weight / ms_per_sample)::bigint, round(w.total_weight / ms_per_sample)::bigint,
               w.self_weight, w.total_weight,
               100 * w.self_weight / total_ms, 100 * w.total_weight / total_ms
          FROM traceprof.stack_function_weights(stack_ids, cpu_ms) w
          LEFT JOIN traceprof.functions f ON f.function_id = w.function_id;
    ELSE
        RETURN QUERY
        SELECT w.function_id, coalesce(f.name, '[unknown]'), coalesce(f.module, ''),
               round(n.self_weight)::bigint, round(n.total_weight)::bigint,
               w.self_weight, w.total_weight,
               100 * w.self_weight / total_ms, 100 * w.total_weight / total_ms
          FROM traceprof.stack_function_weights(stack_ids, cpu_ms) w
          JOIN traceprof.stack_function_weights(stack_ids, samples::double precision[]) n
            ON n.function_id = w.function_id
          LEFT JOIN traceprof.functions f ON f.function_id = w.function_id;
    END IF;
END $$;
