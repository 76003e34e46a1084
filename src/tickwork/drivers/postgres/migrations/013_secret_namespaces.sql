-- Secrets belong to a namespace, as jobs do: a job resolves {"$secret": "name"} in its own
-- namespace only. The secrets set before namespaces had them are in 'default', where the
-- settings' "$secret:NAME" references read them too.
ALTER TABLE secrets ADD COLUMN namespace text NOT NULL DEFAULT 'default';
ALTER TABLE secrets DROP CONSTRAINT secrets_pkey;
ALTER TABLE secrets ADD PRIMARY KEY (namespace, name);
