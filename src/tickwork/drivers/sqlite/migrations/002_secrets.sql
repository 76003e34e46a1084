-- Secrets jobs refer to as {"$secret": "name"}. value is the Fernet token (encrypted with
-- TICKWORK_SECRET_KEY), never the plaintext. Instants are integer microseconds since the
-- Unix epoch, UTC.

CREATE TABLE IF NOT EXISTS secrets (
    name       TEXT PRIMARY KEY,
    value      BLOB NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) WITHOUT ROWID;
