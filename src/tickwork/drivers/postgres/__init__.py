"""The PostgreSQL driver: the postgres deployment's source of truth (psycopg 3, async)."""
