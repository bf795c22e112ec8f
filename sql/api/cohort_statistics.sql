-- cohort_statistics.sql: erfc, normal_p_two_sided, ratio_variance, two_sample_z (taken from migration 005).

-- ---------------------------------------------------------------------
-- The normal tail.
--
-- erfc(x) for x >= 0 is computed as t * exp(-x^2 + P(t)), t = 2 / (2 + x),
-- where P is a degree-20 polynomial fitted (Chebyshev nodes on t in (0, 1],
-- 50-digit reference values) to log(erfc(x) / t) + x^2. That function is
-- analytic in t on [0, 1], including the tail t -> 0, so the fit holds its
-- accuracy everywhere: relative error below 6e-13 for all x where erfc(x)
-- is a normal double, measured in double arithmetic. erfc(x) is 0 past
-- x = 26.55, where the true value drops below the smallest normal double.
CREATE OR REPLACE FUNCTION traceprof.erfc(x double precision) RETURNS double precision
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    ax double precision := abs(x);
    t double precision := 2.0 / (2.0 + abs(x));
    p double precision;
    r double precision;
BEGIN
    IF x = 'NaN'::double precision THEN
        RETURN x;
    END IF;
    IF ax > 26.55 THEN
        r := 0;
    ELSIF ax = 0 THEN
        r := 1;  -- exact, where the fit is 1e-13 off
    ELSE
        -- Horner, highest degree first.
        p := 0.13842798492384864;
        p := p * t - 1.5516810551526157;
        p := p * t + 7.903453498412299;
        p := p * t - 24.121285420494438;
        p := p * t + 48.928493577980085;
        p := p * t - 69.12595654794663;
        p := p * t + 69.40905627702548;
        p := p * t - 50.00718723559132;
        p := p * t + 26.369337277783313;
        p := p * t - 10.725293458254654;
        p := p * t + 3.3867148420548148;
        p := p * t - 0.6193021796619832;
        p := p * t + 0.15868109658432594;
        p := p * t - 0.10792827466771283;
        p := p * t - 0.14233433657229339;
        p := p * t - 0.08602015001829581;
        p := p * t + 0.08333628236320327;
        p := p * t + 0.37499994429949746;
        p := p * t + 1.00000000041813;
        p := p * t - 1.2655121234851678;
        r := t * exp(p - ax * ax);
    END IF;
    RETURN CASE WHEN x < 0 THEN 2.0 - r ELSE r END;
END $$;

-- Two-sided p-value of a standard normal statistic: P(|Z| >= |z|).
CREATE OR REPLACE FUNCTION traceprof.normal_p_two_sided(z double precision) RETURNS double precision
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT traceprof.erfc(abs(z) / sqrt(2.0::double precision))
$$;

-- Cluster-robust variance of the ratio estimator R = sum_f / sum_t from
-- the moments of n clusters (requests). NULL when undefined: fewer than two
-- requests or no CPU. The residual sum of squares is computed from moments,
-- so rounding can leave a tiny value (even a negative one) where the exact
-- result is zero, e.g. for a function on every stack; a residual below
-- 1e-9 of the terms it came from is taken as zero.
CREATE OR REPLACE FUNCTION traceprof.ratio_variance(
    n bigint, sum_t double precision, sum_tt double precision,
    sum_f double precision, sum_ff double precision, sum_ft double precision)
RETURNS double precision
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    r double precision;
    ss double precision;
BEGIN
    IF n IS NULL OR n < 2 OR sum_t IS NULL OR sum_t <= 0 THEN
        RETURN NULL;
    END IF;
    sum_f := coalesce(sum_f, 0);
    sum_ff := coalesce(sum_ff, 0);
    sum_ft := coalesce(sum_ft, 0);
    r := sum_f / sum_t;
    ss := sum_ff - 2 * r * sum_ft + r * r * sum_tt;
    IF ss <= 1e-9 * (sum_ff + r * r * sum_tt) THEN
        ss := 0;
    END IF;
    RETURN n::double precision / (n - 1) * ss / (sum_t * sum_t);
END $$;

-- Two-sample z statistic of two independent estimates with variances.
-- NULL when a variance is undefined. When both variances are zero (every
-- request of each cohort has the same share) the test cannot scale the
-- difference: z is 0 if the shares agree (to 1e-12) and NULL otherwise.
CREATE OR REPLACE FUNCTION traceprof.two_sample_z(
    a double precision, var_a double precision, b double precision, var_b double precision)
RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN a IS NULL OR b IS NULL OR var_a IS NULL OR var_b IS NULL THEN NULL
        WHEN abs(a - b) <= 1e-12 THEN 0
        WHEN var_a + var_b = 0 THEN NULL
        ELSE (a - b) / sqrt(var_a + var_b)
    END
$$;
