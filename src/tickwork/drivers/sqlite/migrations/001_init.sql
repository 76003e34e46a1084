-- Jobs, occurrences and attempts. Instants are integer microseconds since the Unix epoch, UTC.

CREATE TABLE jobs (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    queue       TEXT NOT NULL,
    priority    INTEGER NOT NULL,
    kind        TEXT NOT NULL,
    overlap     TEXT NOT NULL,            -- copied from spec: claims filter on it
    spec        TEXT NOT NULL,            -- the validated job, as JSON (drivers/codec.py)
    tags        TEXT NOT NULL,            -- JSON array, for filtering
    paused      INTEGER NOT NULL DEFAULT 0,
    next_run_at INTEGER,                  -- NULL once the schedule has no more fire times
    shard       INTEGER NOT NULL DEFAULT 0,
    version     INTEGER NOT NULL DEFAULT 1,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    deleted_at  INTEGER
);
CREATE UNIQUE INDEX jobs_name ON jobs (name) WHERE deleted_at IS NULL;
CREATE INDEX jobs_due ON jobs (next_run_at)
    WHERE deleted_at IS NULL AND paused = 0 AND next_run_at IS NOT NULL;

CREATE TABLE occurrences (
    job_id       TEXT NOT NULL,
    scheduled_at INTEGER NOT NULL,
    due_at       INTEGER NOT NULL,
    queue        TEXT NOT NULL,
    priority     INTEGER NOT NULL,
    state        TEXT NOT NULL,
    attempt      INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL,
    trigger      TEXT NOT NULL,
    lease_until  INTEGER,
    worker       TEXT,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    finished_at  INTEGER,
    last_error   TEXT,
    PRIMARY KEY (job_id, scheduled_at)
) WITHOUT ROWID;
CREATE INDEX occurrences_due ON occurrences (queue, priority DESC, due_at)
    WHERE state IN ('scheduled', 'queued', 'retrying');
CREATE INDEX occurrences_running ON occurrences (lease_until) WHERE state = 'running';
CREATE INDEX occurrences_job_running ON occurrences (job_id) WHERE state = 'running';
CREATE INDEX occurrences_scheduled ON occurrences (scheduled_at, job_id);

CREATE TABLE attempts (
    job_id       TEXT NOT NULL,
    scheduled_at INTEGER NOT NULL,
    number       INTEGER NOT NULL,
    worker       TEXT NOT NULL,
    queued_at    INTEGER NOT NULL,
    claimed_at   INTEGER NOT NULL,
    started_at   INTEGER,
    finished_at  INTEGER,
    outcome      TEXT,
    output       TEXT,
    error        TEXT,
    PRIMARY KEY (job_id, scheduled_at, number)
) WITHOUT ROWID;
