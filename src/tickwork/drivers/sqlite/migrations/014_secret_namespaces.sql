-- Secrets belong to a namespace, as jobs do: a job resolves {"$secret": "name"} in its own
-- namespace only. The secrets set before namespaces had them are in 'default', where the
-- settings' "$secret:NAME" references read them too. SQLite cannot change a primary key in
-- place: the table is copied.
CREATE TABLE secrets_by_namespace (
    namespace  TEXT NOT NULL DEFAULT 'default',
    name       TEXT NOT NULL,
    value      BLOB NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (namespace, name)
) WITHOUT ROWID;
INSERT INTO secrets_by_namespace (namespace, name, value, created_at, updated_at)
    SELECT 'default', name, value, created_at, updated_at FROM secrets;
DROP TABLE secrets;
ALTER TABLE secrets_by_namespace RENAME TO secrets;
