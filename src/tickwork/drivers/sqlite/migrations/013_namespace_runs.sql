-- A namespace's max_runs_per_hour is enforced by the claim (drivers/limits.py): the attempts
-- its jobs started per UTC clock hour (integer microseconds of its start), counted by the
-- claims themselves for namespaces that have the quota (and seeded from the attempts when
-- the quota is set). Hours past the history retention are pruned with the history.
CREATE TABLE IF NOT EXISTS namespace_runs (
    namespace TEXT NOT NULL,
    hour      INTEGER NOT NULL,
    runs      INTEGER NOT NULL,
    PRIMARY KEY (namespace, hour)
) WITHOUT ROWID;
