ALTER TABLE service_id_claims DROP COLUMN IF EXISTS active_at;
DROP SEQUENCE IF EXISTS service_id_claim_epochs;
