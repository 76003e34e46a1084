-- The jobs that name alerts, for the alert evaluator: each pass read the text of every live
-- job to find them. The predicate is alert_jobs' own, term for term (SQLite uses a partial
-- index only for a query whose WHERE holds each of its terms).
CREATE INDEX jobs_alerting ON jobs (id)
    WHERE deleted_at IS NULL AND instr(spec, '"alerts":') > 0;
