-- gpu_cohorts.sql: compare_gpu_cohorts.
--
-- compare_offcpu_cohorts (offcpu_cohorts.sql) over GPU time: two cohorts
-- of one service's requests (the same jsonb specs, parse_cohort, and the
-- same request-level statistic), per kernel. A request's GPU time is that
-- of the gpu rows (migration 015) of the service's sources with its
-- (trace_id, span_id) whose bucket lies within config
-- 'request_sample_window' of [start, end]; a kernel's is that of the
-- stacks ending in its [gpu] frame (gpu.sql). From the raw tables only.

-- Per kernel: the GPU ms of each cohort's requests, the mean per request
-- of the cohort (all its requests, with GPU time or not: which kernels
-- grew), its share of the cohort's GPU time, delta = a_share - b_share,
-- the request-level z statistic of delta and its two-sided p-value.
-- Ordered by |delta|, then kernel.
CREATE OR REPLACE FUNCTION traceprof.compare_gpu_cohorts(
    service text, from_time timestamptz, until_time timestamptz, cohort_a jsonb, cohort_b jsonb)
RETURNS TABLE (kernel text, a_gpu_ms double precision, b_gpu_ms double precision,
               a_ms_per_request double precision, b_ms_per_request double precision,
               a_share double precision, b_share double precision, delta double precision,
               z double precision, p_value double precision)
LANGUAGE sql STABLE AS $$
    SELECT * FROM traceprof._compare_time_cohorts('gpu', $1, $2, $3, $4, $5)
$$;
