-- Active/standby with missed-heartbeat events (package heartbeat). Only package heartbeat
-- writes these tables. Every time in them is the database's (now() or clock_timestamp()).

-- The configuration status: one row. Reconfiguration locks it, so two reconfigurations never
-- interleave, and bumps generation, so every event type row says which configuration last
-- wrote it.
CREATE TABLE heartbeat_config (
    singleton   boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    generation  bigint      NOT NULL DEFAULT 0,
    updated_at  timestamptz NOT NULL DEFAULT now()
);
INSERT INTO heartbeat_config DEFAULT VALUES;

-- One row per configured eventName: how often its sources must beat and how many
-- consecutive misses raise a control-loop event. valid is the reconfiguration's validity
-- flag: a reconfiguration marks every row invalid and every row it names valid again, in one
-- transaction; the active instance clears the open events of invalid rows and deletes them
-- (with their sources).
CREATE TABLE heartbeat_event_types (
    event_name   text        PRIMARY KEY CHECK (event_name <> ''),
    interval_ms  bigint      NOT NULL CHECK (interval_ms > 0),
    missed_count integer     NOT NULL CHECK (missed_count > 0),
    -- policyVersion, policyName, policyScope, target_type, target, closedLoopControlName,
    -- version: copied into every event of this type.
    control_loop jsonb       NOT NULL DEFAULT '{}',
    valid        boolean     NOT NULL DEFAULT true,
    generation   bigint      NOT NULL DEFAULT 0,
    updated_at   timestamptz NOT NULL DEFAULT now()
);

-- One row per (eventName, sourceName) that has sent a heartbeat.
CREATE TABLE heartbeat_sources (
    event_name          text        NOT NULL REFERENCES heartbeat_event_types (event_name) ON DELETE CASCADE,
    source_name         text        NOT NULL CHECK (source_name <> ''),
    first_received_at   timestamptz NOT NULL,
    -- The database's clock when the last heartbeat was stored: what miss detection compares
    -- with now().
    received_at         timestamptz NOT NULL,
    -- The source's own clock in its last heartbeat (lastEpochMicrosec): recorded and passed on
    -- in events, never used to judge a miss.
    last_epoch_microsec bigint      NOT NULL,
    -- Heartbeats stored so far: the sequence number of the last one.
    heartbeats          bigint      NOT NULL DEFAULT 1,
    -- Episodes raised so far (the number of the last one); never decreases, also across a
    -- removal and re-creation of the row (it restarts from the highest stored event).
    episodes            bigint      NOT NULL DEFAULT 0,
    -- Whether episode number `episodes` is raised and not yet cleared.
    raised              boolean     NOT NULL DEFAULT false,
    -- heartbeats when the open episode was raised: a larger count is a fresh heartbeat.
    raised_heartbeat    bigint,
    -- A silence of missed_count intervals that ended before any step saw it (no active
    -- instance ran a step meanwhile, as during a failover): set by the heartbeat that ended
    -- it to the heartbeat count and received_at before the silence, so that the next step
    -- raises that episode (and clears it at once) instead of losing it. late_received_at
    -- and late_epoch_microsec are meaningful only while late_heartbeat is set, and in the
    -- raise that consumes it.
    late_heartbeat      bigint,
    late_received_at    timestamptz,
    late_epoch_microsec bigint,
    PRIMARY KEY (event_name, source_name)
);

-- The control-loop events and, in the same rows, their delivery outbox. A raise and its clear
-- are written once per episode: the unique key makes a repeat impossible.
CREATE TABLE heartbeat_events (
    id                  bigserial   PRIMARY KEY,
    event_name          text        NOT NULL,
    source_name         text        NOT NULL,
    episode             bigint      NOT NULL,
    -- raised | cleared
    kind                text        NOT NULL CHECK (kind IN ('raised', 'cleared')),
    -- missed (raised), heartbeat (cleared by a fresh heartbeat), removed (cleared because the
    -- event type was removed by a reconfiguration)
    reason              text        NOT NULL,
    -- The source as it was when the event was written.
    last_received_at    timestamptz NOT NULL,
    last_epoch_microsec bigint      NOT NULL,
    heartbeat_seq       bigint      NOT NULL,
    interval_ms         bigint      NOT NULL,
    missed_count        integer     NOT NULL,
    control_loop        jsonb       NOT NULL,
    -- The active instance that wrote it and its election term (fencing epoch).
    instance_id         uuid        NOT NULL,
    term_epoch          bigint      NOT NULL,
    -- clock_timestamp(): taken while the writer holds its fence, so it lies inside its term.
    written_at          timestamptz NOT NULL DEFAULT clock_timestamp(),
    -- Outbox: NULL until the hook and the webhook both accepted it.
    delivered_at        timestamptz,
    attempts            integer     NOT NULL DEFAULT 0,
    next_attempt_at     timestamptz NOT NULL DEFAULT now(),
    last_error          text        NOT NULL DEFAULT '',
    UNIQUE (event_name, source_name, episode, kind)
);
CREATE INDEX heartbeat_events_outbox_idx ON heartbeat_events (event_name, source_name, id)
    WHERE delivered_at IS NULL;
