-- The batch pipeline's tables.
CREATE TABLE batches (
    -- The per-service order: batches of one service_id go out in seq order. Never a timestamp.
    seq               bigserial   PRIMARY KEY,
    service_id        text        NOT NULL,
    -- For Sawtooth/Splinter the batch header signature (128 hex characters).
    batch_id          text        NOT NULL,
    -- The full serialized BatchList (or opaque bytes for another Submitter).
    payload           bytea       NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now(),
    state             text        NOT NULL DEFAULT 'NEW',
    attempts          integer     NOT NULL DEFAULT 0,
    -- Claimant and epoch of the last write; every write is fenced on them.
    claimant          uuid,
    claim_epoch       bigint,
    submitted_at      timestamptz,
    next_attempt_at   timestamptz,
    last_error        text,
    -- What the ledger last said, and how many UNKNOWN answers came in a row.
    dlt_status        text,
    status_updated_at timestamptz,
    unknown_count     integer     NOT NULL DEFAULT 0,
    invalid_details   jsonb,
    updated_at        timestamptz NOT NULL DEFAULT now(),
    UNIQUE (service_id, batch_id),
    CHECK (state IN ('NEW', 'INFLIGHT', 'PENDING', 'DELAYED', 'UNKNOWN', 'VALID', 'COMMITTED', 'INVALID')),
    CHECK (dlt_status IS NULL OR dlt_status IN ('PENDING', 'INVALID', 'VALID', 'COMMITTED', 'UNKNOWN'))
);

-- The queuer's hot query is "the oldest unfinished batch of each claimed service_id"; the
-- poller's is "unfinished batches of claimed service_ids". A partial index over unfinished
-- batches answers both by (service_id, seq) and stays small however many batches completed.
CREATE INDEX batches_open_idx ON batches (service_id, seq)
    WHERE state NOT IN ('COMMITTED', 'INVALID');
-- The ingest API answers GET /batch_statuses?id=... by batch id alone.
CREATE INDEX batches_batch_id_idx ON batches (batch_id);

-- Service_ids halted after an INVALID batch (when the halt-on-invalid option is on). The
-- queuer sends nothing more for them until an operator deletes the row.
CREATE TABLE service_halts (
    service_id text        PRIMARY KEY,
    seq        bigint      NOT NULL,
    reason     text        NOT NULL,
    at         timestamptz NOT NULL DEFAULT now()
);

-- Append-only: one row per POST attempt, written in the same transaction as the fenced
-- in-flight mark (so a POST that never reports back is still visible), its outcome filled in
-- once. Every duplicate submission of a batch is visible here after the fact.
CREATE TABLE submission_attempts (
    id          bigserial   PRIMARY KEY,
    seq         bigint      NOT NULL REFERENCES batches (seq) ON DELETE CASCADE,
    service_id  text        NOT NULL,
    batch_id    text        NOT NULL,
    instance_id uuid        NOT NULL,
    epoch       bigint      NOT NULL,
    -- Why this attempt was made: first, retry (back-pressure), resubmit (unknown outcome).
    reason      text        NOT NULL,
    started_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    http_status integer,
    latency_ms  double precision,
    outcome     text,
    error       text
);
-- History of one batch, in order.
CREATE INDEX submission_attempts_seq_idx ON submission_attempts (seq, id);

-- Append-only: every state change of every batch, with the claimant and epoch that made it.
CREATE TABLE batch_transitions (
    id          bigserial   PRIMARY KEY,
    seq         bigint      NOT NULL REFERENCES batches (seq) ON DELETE CASCADE,
    from_state  text,
    to_state    text        NOT NULL,
    instance_id uuid,
    epoch       bigint,
    at          timestamptz NOT NULL DEFAULT now(),
    detail      text
);
CREATE INDEX batch_transitions_seq_idx ON batch_transitions (seq, id);
