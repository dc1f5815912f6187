DROP VIEW IF EXISTS service_id_claims_effective;
DROP TABLE IF EXISTS claim_events;
DROP TABLE IF EXISTS service_id_claims;
DROP TABLE IF EXISTS instances;
