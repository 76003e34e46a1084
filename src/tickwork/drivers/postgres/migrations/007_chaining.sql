-- Trigger chains and backfill overlap choices, both per occurrence:
-- upstream: for a run a chain triggered (trigger 'chain'), the run that ended and triggered
--           it, as JSON (drivers/codec.py upstream_to_json); NULL otherwise.
-- overlap:  the overlap policy this run is claimed under instead of its job's (a backfill
--           with an explicit choice); NULL: the job's own.
ALTER TABLE occurrences ADD COLUMN upstream text;
ALTER TABLE occurrences ADD COLUMN overlap text;
