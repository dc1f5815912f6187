-- Per-key single-flight cache (package singleflight). Only package singleflight writes it.
--
-- One row per key holds both the cached entry and the fetch lease, so that every decision
-- (is the entry fresh, is a fetch running, may I take it over, may I store this result) is
-- one statement on one locked row.

-- Fetch epochs come from one sequence: each new fetch of any key takes a value never handed
-- out before, and because the value is drawn after the key's row is locked, it is larger than
-- every epoch that key had, even if the row was deleted and made again.
CREATE SEQUENCE singleflight_epoch_seq;

CREATE TABLE singleflight_entries (
    key             text        PRIMARY KEY,
    -- The fetch lease. fetch_epoch is the epoch of the latest fetch begun for the key;
    -- holder is the instance running it (NULL once it stored its result or gave up), until
    -- lease_expiry (database time, renewed while the source runs). pending_expiry is the
    -- expiry that fetch's result will get, fixed when the lease was taken.
    fetch_epoch     bigint      NOT NULL,
    holder          text,
    lease_expiry    timestamptz,
    fetch_started_at timestamptz NOT NULL,
    pending_expiry  timestamptz NOT NULL,
    -- Set when the current fetch took over an expired lease: the holder it replaced.
    taken_over_from text,
    -- The cached value and the fetch epoch that produced it (NULL before the first success).
    -- value_epoch only grows: a result is stored only by the current fetch epoch.
    value           bytea,
    value_epoch     bigint,
    fetched_at      timestamptz,
    expires_at      timestamptz,
    -- A negative result: the source's error of epoch error_epoch, served until error_until.
    error           text,
    error_epoch     bigint,
    error_until     timestamptz,
    CHECK (key <> ''),
    CHECK ((holder IS NULL) = (lease_expiry IS NULL)),
    CHECK (value_epoch IS NULL OR value_epoch <= fetch_epoch),
    CHECK (error_epoch IS NULL OR error_epoch <= fetch_epoch)
);
