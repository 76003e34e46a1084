-- Alerts that fire and resolve, and their deliveries (drivers/alerts.py).
CREATE TABLE alerts (
    id          TEXT PRIMARY KEY,
    job_id      TEXT NOT NULL,
    job_name    TEXT NOT NULL,
    condition   TEXT NOT NULL,            -- failed, consecutive_failures, late_start, ...
    state       TEXT NOT NULL,            -- firing | resolved
    detail      TEXT NOT NULL,
    notified    INTEGER NOT NULL,         -- 0: fired inside the cooldown, nothing sent
    fired_at    INTEGER NOT NULL,
    resolved_at INTEGER,
    updated_at  INTEGER NOT NULL
);
-- One firing alert per job and condition: racing evaluators record it once.
CREATE UNIQUE INDEX alerts_firing ON alerts (job_id, condition) WHERE state = 'firing';
CREATE INDEX alerts_recent ON alerts (fired_at, id);
CREATE INDEX alerts_job ON alerts (job_id, condition, fired_at);

CREATE TABLE alert_deliveries (
    id              TEXT PRIMARY KEY,
    alert_id        TEXT NOT NULL,
    event           TEXT NOT NULL,        -- fired | resolved
    channel         INTEGER NOT NULL,     -- its index in the job's alerts.channels
    kind            TEXT NOT NULL,        -- slack | email | webhook
    payload         TEXT NOT NULL,        -- the executor payload, secrets as references
    state           TEXT NOT NULL,        -- pending | delivered | failed
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL,
    last_error      TEXT,
    created_at      INTEGER NOT NULL,
    finished_at     INTEGER
);
CREATE INDEX alert_deliveries_pending ON alert_deliveries (next_attempt_at)
    WHERE state = 'pending';
CREATE INDEX alert_deliveries_alert ON alert_deliveries (alert_id);
