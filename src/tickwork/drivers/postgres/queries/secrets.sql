-- Queries of the PostgreSQL SecretStore (drivers/postgres/secrets.py). value is ciphertext.

-- name: secret_upsert
-- A new secret gets created_at = updated_at = now; a replaced one keeps its created_at.
INSERT INTO secrets (name, value, created_at, updated_at)
VALUES (%(name)s, %(value)s, %(now)s, %(now)s)
ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at

-- name: secret_get
SELECT value FROM secrets WHERE name = %s

-- name: secret_list
SELECT name, updated_at FROM secrets ORDER BY name COLLATE "C"

-- name: secret_delete
DELETE FROM secrets WHERE name = %s
