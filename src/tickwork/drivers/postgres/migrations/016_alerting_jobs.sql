-- The jobs that name alerts, for the alert evaluator: a pass every alert_interval_seconds
-- read the text of every live job to find them (1.5 s a pass with 288,000 jobs, a fifth of a
-- core). The predicate is alert_jobs' own, so the evaluator reads only the jobs it judges.
CREATE INDEX jobs_alerting ON jobs (id)
    WHERE deleted_at IS NULL AND strpos(spec, '"alerts":') > 0;
