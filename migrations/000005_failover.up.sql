-- Owner-token locks (package lock) and shard failover on top of them (package failover).
-- Every time in these tables is the database's: now() for expiries, clock_timestamp() for
-- history rows, so that a history row is stamped after the writer's snapshot.

-- One row per lock name ever taken. Rows are never deleted, so an epoch never repeats and
-- serves as a fencing token.
CREATE TABLE owner_locks (
    name        text        PRIMARY KEY CHECK (name <> ''),
    -- Random per acquisition, known only to its holder; NULL while the lock is free.
    token       text,
    -- +1 on every acquisition.
    epoch       bigint      NOT NULL DEFAULT 0,
    acquired_at timestamptz,
    -- Judged against the database's now(): past it, anybody may acquire the lock.
    expires_at  timestamptz,
    CHECK ((token IS NULL) = (expires_at IS NULL))
);

-- Append-only: one row per acquisition and per release (never per renewal).
CREATE TABLE owner_lock_events (
    id         bigserial   PRIMARY KEY,
    name       text        NOT NULL,
    epoch      bigint      NOT NULL,
    -- acquired | released
    event      text        NOT NULL,
    expires_at timestamptz,
    at         timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX owner_lock_events_name_idx ON owner_lock_events (name, epoch);

-- The durable decision: which node is the shard's primary, at which epoch. Written only by
-- the holder of the shard's failover lock (and once at bootstrap).
CREATE TABLE failover_shards (
    shard      text        PRIMARY KEY CHECK (shard <> ''),
    epoch      bigint      NOT NULL CHECK (epoch > 0),
    primary_id text        NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- Each node's registration, rewritten every heartbeat interval (the source design's record).
CREATE TABLE failover_nodes (
    node_id      text        PRIMARY KEY CHECK (node_id <> ''),
    shard        text        NOT NULL,
    address      text        NOT NULL DEFAULT '',
    -- primary | replica, as the node itself last reported.
    role         text        NOT NULL CHECK (role IN ('primary', 'replica')),
    primary_id   text        NOT NULL DEFAULT '',
    -- The highest shard epoch the node has acted on.
    epoch        bigint      NOT NULL DEFAULT 0,
    -- Progress: the last transaction applied to the node's data set.
    last_txn_id  bigint      NOT NULL DEFAULT 0,
    last_updated timestamptz NOT NULL,
    started_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX failover_nodes_shard_idx ON failover_nodes (shard, last_txn_id DESC);

-- Role history, written by each node when it changes role. A primary row is also the
-- primary's lease: renewed_at and lease_until move on each of its heartbeats, and only while
-- failover_shards still names it at that epoch.
CREATE TABLE failover_roles (
    id          bigserial   PRIMARY KEY,
    shard       text        NOT NULL,
    node_id     text        NOT NULL,
    epoch       bigint      NOT NULL,
    role        text        NOT NULL CHECK (role IN ('primary', 'replica')),
    primary_id  text        NOT NULL,
    at          timestamptz NOT NULL DEFAULT clock_timestamp(),
    renewed_at  timestamptz,
    lease_until timestamptz,
    CHECK ((role = 'primary') = (lease_until IS NOT NULL))
);
-- At most one primary per shard epoch, whatever the nodes do.
CREATE UNIQUE INDEX failover_roles_primary_idx ON failover_roles (shard, epoch) WHERE role = 'primary';
CREATE INDEX failover_roles_node_idx ON failover_roles (node_id, id);

-- One row per failover decision. outcome stays NULL until the decision is completed (its new
-- primary confirmed) or superseded by a later decision; a NULL outcome is what another
-- orchestrator resumes.
CREATE TABLE failover_decisions (
    shard        text        NOT NULL,
    epoch        bigint      NOT NULL,
    old_primary  text        NOT NULL,
    new_primary  text        NOT NULL,
    decided_by   text        NOT NULL,
    lock_epoch   bigint      NOT NULL,
    decided_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    -- Registrations updated after this instant counted as live candidates.
    live_after   timestamptz NOT NULL,
    outcome      text        CHECK (outcome IN ('completed', 'superseded')),
    completed_at timestamptz,
    completed_by text,
    PRIMARY KEY (shard, epoch)
);

-- The registrations the decision saw, copied inside the deciding transaction, so that an
-- audit can judge the choice from the database's own record.
CREATE TABLE failover_decision_nodes (
    shard        text        NOT NULL,
    epoch        bigint      NOT NULL,
    node_id      text        NOT NULL,
    role         text        NOT NULL,
    last_txn_id  bigint      NOT NULL,
    last_updated timestamptz NOT NULL,
    PRIMARY KEY (shard, epoch, node_id)
);

-- Per-node command queues (the source design's LPUSH / BRPOP). A command is consumed once:
-- the consumer sets consumed_at in the transaction that applies it.
CREATE TABLE failover_commands (
    id              bigserial   PRIMARY KEY,
    node_id         text        NOT NULL,
    shard           text        NOT NULL,
    epoch           bigint      NOT NULL,
    -- promote | replicaof
    kind            text        NOT NULL CHECK (kind IN ('promote', 'replicaof')),
    primary_id      text        NOT NULL,
    primary_address text        NOT NULL DEFAULT '',
    issued_by       text        NOT NULL,
    issued_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    consumed_at     timestamptz,
    -- A resumed failover issues the same commands again: they are stored once.
    UNIQUE (node_id, epoch, kind)
);
CREATE INDEX failover_commands_queue_idx ON failover_commands (node_id, id) WHERE consumed_at IS NULL;
