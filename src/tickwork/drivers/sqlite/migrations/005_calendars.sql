-- Named calendars that schedules exclude or are restricted to (drivers/calendars.py).
CREATE TABLE calendars (
    name       TEXT PRIMARY KEY,
    document   TEXT NOT NULL,            -- the checked calendar document, as JSON
    version    INTEGER NOT NULL DEFAULT 1,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
