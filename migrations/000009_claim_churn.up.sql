-- Keys that come and go. A job runner's keys are often unbounded (one per order, per user);
-- a claim row that lived forever would keep every key ever seen in the claim engine's work.
-- An owner may now delete the claim row of a service_id that has had no unfinished batch for
-- a configured idle time; the next enqueue creates it again.
--
-- Epochs come from one global sequence, so a re-created row can never hand out an epoch an
-- earlier row of the same service_id used: a stale owner's (claimant, epoch) never matches
-- again. The sequence starts above every epoch stored so far.
CREATE SEQUENCE service_id_claim_epochs AS bigint;
SELECT setval('service_id_claim_epochs', COALESCE((SELECT max(epoch) FROM service_id_claims), 0) + 1, false);

-- When the owner last recorded a POST outcome for the service_id: together with "no unfinished
-- batch", it says how long the key has been idle. NULL means never (claimed_at counts then).
ALTER TABLE service_id_claims ADD COLUMN active_at timestamptz;
