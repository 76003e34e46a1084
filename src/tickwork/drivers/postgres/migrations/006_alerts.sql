-- Alerts that fire and resolve, and their deliveries (drivers/alerts.py).
CREATE TABLE alerts (
    id          text PRIMARY KEY,
    job_id      text NOT NULL,
    job_name    text NOT NULL,
    condition   text NOT NULL,            -- failed, consecutive_failures, late_start, ...
    state       text NOT NULL,            -- firing | resolved
    detail      text NOT NULL,
    notified    boolean NOT NULL,         -- false: fired inside the cooldown, nothing sent
    fired_at    timestamptz NOT NULL,
    resolved_at timestamptz,
    updated_at  timestamptz NOT NULL
);
-- One firing alert per job and condition: racing evaluators record it once.
CREATE UNIQUE INDEX alerts_firing ON alerts (job_id, condition) WHERE state = 'firing';
CREATE INDEX alerts_recent ON alerts (fired_at DESC, id DESC);
CREATE INDEX alerts_job ON alerts (job_id, condition, fired_at);

CREATE TABLE alert_deliveries (
    id              text PRIMARY KEY,
    alert_id        text NOT NULL,
    event           text NOT NULL,        -- fired | resolved
    channel         integer NOT NULL,     -- its index in the job's alerts.channels
    kind            text NOT NULL,        -- slack | email | webhook
    payload         text NOT NULL,        -- the executor payload, secrets as references
    state           text NOT NULL,        -- pending | delivered | failed
    attempts        integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL,
    last_error      text,
    created_at      timestamptz NOT NULL,
    finished_at     timestamptz
);
CREATE INDEX alert_deliveries_pending ON alert_deliveries (next_attempt_at)
    WHERE state = 'pending';
CREATE INDEX alert_deliveries_alert ON alert_deliveries (alert_id);
