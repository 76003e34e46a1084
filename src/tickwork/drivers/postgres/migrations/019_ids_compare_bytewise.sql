-- Job ids compare byte by byte (collation "C"), wherever they are stored: the database's
-- default collation (en_US.UTF-8, C.UTF-8) compares text through the C library's strcoll,
-- which every probe of a job's primary key, every claim and completion (the occurrence's
-- key is the job's id and its time) and every attempt's row pays, several times per index
-- level. Ids are random hex: their byte order is as good as any, and the listings already
-- order them bytewise (COLLATE "C"). Only collations change: no row is rewritten, the
-- indexes on these columns are rebuilt.
ALTER TABLE jobs ALTER COLUMN id TYPE text COLLATE "C";
ALTER TABLE occurrences ALTER COLUMN job_id TYPE text COLLATE "C";
ALTER TABLE attempts ALTER COLUMN job_id TYPE text COLLATE "C";
ALTER TABLE audit_log ALTER COLUMN job_id TYPE text COLLATE "C";
ALTER TABLE alerts ALTER COLUMN job_id TYPE text COLLATE "C";
ALTER TABLE job_dedupe ALTER COLUMN job_id TYPE text COLLATE "C";
