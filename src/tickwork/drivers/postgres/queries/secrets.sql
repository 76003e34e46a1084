-- Queries of the PostgreSQL SecretStore (drivers/postgres/secrets.py). value is ciphertext.
-- A secret is (namespace, name): every query names the namespace.

-- name: secret_upsert
-- A new secret gets created_at = updated_at = now; a replaced one keeps its created_at.
INSERT INTO secrets (namespace, name, value, created_at, updated_at)
VALUES (%(namespace)s, %(name)s, %(value)s, %(now)s, %(now)s)
ON CONFLICT (namespace, name) DO UPDATE
SET value = excluded.value, updated_at = excluded.updated_at

-- name: secret_get
SELECT value FROM secrets WHERE namespace = %s AND name = %s

-- name: secret_list
SELECT name, updated_at FROM secrets WHERE namespace = %s ORDER BY name COLLATE "C"

-- name: secret_namespaces
SELECT namespace FROM secrets GROUP BY namespace ORDER BY namespace COLLATE "C"

-- name: secret_delete
DELETE FROM secrets WHERE namespace = %s AND name = %s
