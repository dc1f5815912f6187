-- Primary per role (package election). Only package election writes these tables.
--
-- election_members is one row per running elector: its lease. Renewing it is one UPDATE per
-- heartbeat interval, whatever the number of roles the instance is primary of. A term is live
-- while its holder's lease has not expired (expires_at > the database's now()).
CREATE TABLE election_members (
    instance_id uuid        PRIMARY KEY,
    name        text        NOT NULL DEFAULT '',
    host        text        NOT NULL DEFAULT '',
    joined_at   timestamptz NOT NULL DEFAULT now(),
    renewed_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL
);

-- One row per role ever seen; rows are never deleted, so an epoch is never reused. The row
-- changes only when the term changes (election, resignation): the holder's heartbeat writes
-- election_members instead, so a transaction that fences on this row (FOR SHARE) never holds
-- up the holder's own renewal, while a takeover (an UPDATE of this row) waits for it.
CREATE TABLE election_terms (
    role        text        PRIMARY KEY CHECK (role <> ''),
    -- +1 on every election. The fencing token of the term.
    epoch       bigint      NOT NULL DEFAULT 0,
    -- NULL when nobody holds the role (never elected, or resigned).
    instance_id uuid,
    name        text        NOT NULL DEFAULT '',
    host        text        NOT NULL DEFAULT '',
    elected_at  timestamptz
);

-- Append-only history of terms: one row per election or resignation, never per heartbeat.
CREATE TABLE election_events (
    id          bigserial   PRIMARY KEY,
    role        text        NOT NULL,
    epoch       bigint      NOT NULL,
    instance_id uuid        NOT NULL,
    name        text        NOT NULL DEFAULT '',
    host        text        NOT NULL DEFAULT '',
    -- elected | resigned
    event       text        NOT NULL,
    -- clock_timestamp() when the row is written, which is after the term row was locked and
    -- changed: every transaction fenced on the previous term had committed by then.
    at          timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX election_events_role_idx ON election_events (role, id);
