-- tickwork on PostgreSQL: jobs, occurrences, attempts (daily partitions), shard leases.
-- Instants are timestamptz; every session runs with TimeZone = UTC.

CREATE TABLE tickwork_meta (
    key   text PRIMARY KEY,
    value text NOT NULL
);

CREATE TABLE jobs (
    id              text PRIMARY KEY,
    name            text NOT NULL,
    queue           text NOT NULL,
    priority        integer NOT NULL,
    kind            text NOT NULL,
    overlap         text NOT NULL,              -- copied from spec: claims filter on it
    timeout_seconds double precision NOT NULL,  -- copied from spec: heartbeats read it
    spec            text NOT NULL,              -- the validated job, as JSON (drivers/codec.py)
    tags            text[] NOT NULL DEFAULT '{}',
    paused          boolean NOT NULL DEFAULT false,
    next_run_at     timestamptz,                -- NULL once the schedule has no more fire times
    shard           integer NOT NULL DEFAULT 0, -- hash of id mod the database's shard count
    version         integer NOT NULL DEFAULT 1,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    deleted_at      timestamptz
);
CREATE UNIQUE INDEX jobs_name ON jobs (name) WHERE deleted_at IS NULL;
CREATE INDEX jobs_due ON jobs (next_run_at)
    WHERE deleted_at IS NULL AND NOT paused AND next_run_at IS NOT NULL;
CREATE INDEX jobs_tags ON jobs USING gin (tags);

-- The occurrence's primary key is its identity: nothing else decides whether it ran.
CREATE TABLE occurrences (
    job_id       text NOT NULL,
    scheduled_at timestamptz NOT NULL,
    due_at       timestamptz NOT NULL,
    queue        text NOT NULL,
    priority     integer NOT NULL,
    state        text NOT NULL,
    attempt      integer NOT NULL DEFAULT 0,
    max_attempts integer NOT NULL,
    trigger      text NOT NULL,
    lease_until  timestamptz,
    worker       text,
    created_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL,
    finished_at  timestamptz,
    last_error   text,
    PRIMARY KEY (job_id, scheduled_at)
);
CREATE INDEX occurrences_due ON occurrences (queue, priority DESC, due_at)
    WHERE state IN ('scheduled', 'queued', 'retrying');
CREATE INDEX occurrences_running ON occurrences (lease_until) WHERE state = 'running';
CREATE INDEX occurrences_job_running ON occurrences (job_id) WHERE state = 'running';
CREATE INDEX occurrences_scheduled ON occurrences (scheduled_at, job_id);
CREATE INDEX occurrences_finished ON occurrences (finished_at) WHERE finished_at IS NOT NULL;

-- Attempts live in daily partitions of scheduled_at, created ahead by the pruner, so old
-- history is dropped a day at a time; the default partition catches anything outside them.
CREATE TABLE attempts (
    job_id       text NOT NULL,
    scheduled_at timestamptz NOT NULL,
    number       integer NOT NULL,
    worker       text NOT NULL,
    queued_at    timestamptz NOT NULL,
    claimed_at   timestamptz NOT NULL,
    started_at   timestamptz,
    finished_at  timestamptz,
    outcome      text,
    output       text,
    error        text,
    PRIMARY KEY (job_id, scheduled_at, number)
) PARTITION BY RANGE (scheduled_at);
CREATE TABLE attempts_default PARTITION OF attempts DEFAULT;

-- Which scheduler plans which shard of jobs, until when. Saves work; correctness comes from
-- primary keys and the attempt fence, never from these leases.
CREATE TABLE shard_leases (
    shard      integer PRIMARY KEY,
    owner      text,
    expires_at timestamptz NOT NULL DEFAULT '-infinity'
);

-- Schedulers alive recently: each takes its fair share, shard_count / live schedulers.
CREATE TABLE scheduler_nodes (
    id         text PRIMARY KEY,
    expires_at timestamptz NOT NULL
);
