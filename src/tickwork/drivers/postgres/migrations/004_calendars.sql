-- Named calendars that schedules exclude or are restricted to (drivers/calendars.py).
CREATE TABLE calendars (
    name       text PRIMARY KEY,
    document   text NOT NULL,            -- the checked calendar document, as JSON
    version    integer NOT NULL DEFAULT 1,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);
