-- The claim engine's tables. Only package claims writes them.
--
-- instances is the registry of running processes, and each row is also the lease that keeps
-- all of that instance's claims alive: renewing is one UPDATE of one row per renew interval,
-- whatever the number of claims (O(1) writes per instance; DESIGN 4.9). A claim's effective
-- expiries are its claimant's expiry_1 / expiry_2 (see the view below).
CREATE TABLE instances (
    id           uuid        PRIMARY KEY,
    name         text        NOT NULL,
    host         text        NOT NULL DEFAULT '',
    version      text        NOT NULL DEFAULT '',
    started_at   timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now(),
    -- Phase one: until expiry_1 the instance is healthy; its claims are untouchable.
    expiry_1     timestamptz NOT NULL,
    -- Phase two: between expiry_1 and expiry_2 only its idle claims may be taken; past
    -- expiry_2 all of them may.
    expiry_2     timestamptz NOT NULL,
    CHECK (expiry_2 > expiry_1)
);

-- One row per service_id ever seen. Rows are never deleted, so an epoch is never reused.
CREATE TABLE service_id_claims (
    service_id       text        PRIMARY KEY,
    -- NULL when free. Deleting an instance row (graceful deregistration or pruning) frees
    -- whatever it still held.
    claimant         uuid        REFERENCES instances (id) ON DELETE SET NULL,
    -- +1 on every acquisition. Every write an owner makes about the service_id is
    -- conditional on (claimant, epoch).
    epoch            bigint      NOT NULL DEFAULT 0,
    claimed_at       timestamptz,
    -- Set while the owner has a batch of this service_id in submission (from the fenced
    -- in-flight mark to the recorded POST outcome). Past expiry_1 a claim with this set is
    -- kept for its owner until expiry_2. Being a column of the claim row, setting it
    -- conflicts with a concurrent takeover of the same row, so the fast path can never take a
    -- claim whose owner has just started a POST.
    submitting_since timestamptz,
    registered_at    timestamptz NOT NULL DEFAULT now(),
    CHECK (service_id <> '')
);

-- Own claims (renewal, fencing, fair-share counts) look claims up by claimant.
CREATE INDEX service_id_claims_claimant_idx ON service_id_claims (claimant);
-- Acquisition reads only free rows, starting at a random point of a hash order so that
-- instances acquiring at the same time read (and predicate-lock, under SERIALIZABLE) different
-- parts of the index instead of all fighting over its first page.
CREATE INDEX service_id_claims_free_idx ON service_id_claims (hashtextextended(service_id, 0))
    WHERE claimant IS NULL;

-- Append-only history of ownership: one row per acquisition, release or void (never per
-- renewal). Tests and operators read from it who owned what, with which epoch, and when (DB
-- time).
CREATE TABLE claim_events (
    id          bigserial   PRIMARY KEY,
    service_id  text        NOT NULL,
    instance_id uuid        NOT NULL,
    epoch       bigint      NOT NULL,
    -- acquired | released | surplus_released | voided_idle | voided_expired
    event       text        NOT NULL,
    -- clock_timestamp(), not now(): taken while the change is being written, after the
    -- writer's snapshot, so a takeover's row always comes after the end of the previous
    -- ownership it saw.
    at          timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX claim_events_service_idx ON claim_events (service_id, id);

-- Each claim with its effective expiries, for the status command and for operators.
CREATE VIEW service_id_claims_effective AS
SELECT
    c.service_id,
    c.claimant,
    i.name         AS claimant_name,
    c.epoch,
    c.claimed_at,
    i.heartbeat_at AS renewed_at,
    i.expiry_1,
    i.expiry_2,
    c.submitting_since,
    CASE
        WHEN c.claimant IS NULL THEN 'free'
        WHEN now() < i.expiry_1 THEN 'held'
        WHEN now() < i.expiry_2 AND c.submitting_since IS NOT NULL THEN 'held_busy'
        ELSE 'expired'
    END AS phase
FROM service_id_claims c
LEFT JOIN instances i ON i.id = c.claimant;
