-- A namespace's max_runs_per_hour is enforced by the claim (drivers/limits.py): the attempts
-- its jobs started per UTC clock hour, counted by the claims themselves for namespaces that
-- have the quota (and seeded from the attempts when the quota is set). The claim locks the
-- row of the hour, so claimers of one namespace take turns and cannot pass it together.
-- Hours past the history retention are pruned with the history.
CREATE TABLE namespace_runs (
    namespace text NOT NULL,
    hour      timestamptz NOT NULL,
    runs      bigint NOT NULL,
    PRIMARY KEY (namespace, hour)
);
