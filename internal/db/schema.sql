-- Not a migration: sqlc reads this after migrations/ so that its catalog has the tables where
-- migrations.Up puts them, in the schema batchclaim (see docs/schema.md). Every table, view,
-- sequence and function the migrations create is listed; TestSQLCSchemaListsEveryObject checks it.
CREATE SCHEMA batchclaim;
ALTER TABLE batch_transitions SET SCHEMA batchclaim;
ALTER TABLE batches SET SCHEMA batchclaim;
ALTER TABLE claim_events SET SCHEMA batchclaim;
ALTER TABLE election_events SET SCHEMA batchclaim;
ALTER TABLE election_members SET SCHEMA batchclaim;
ALTER TABLE election_terms SET SCHEMA batchclaim;
ALTER TABLE failover_commands SET SCHEMA batchclaim;
ALTER TABLE failover_decision_nodes SET SCHEMA batchclaim;
ALTER TABLE failover_decisions SET SCHEMA batchclaim;
ALTER TABLE failover_nodes SET SCHEMA batchclaim;
ALTER TABLE failover_roles SET SCHEMA batchclaim;
ALTER TABLE failover_shards SET SCHEMA batchclaim;
ALTER TABLE heartbeat_config SET SCHEMA batchclaim;
ALTER TABLE heartbeat_event_types SET SCHEMA batchclaim;
ALTER TABLE heartbeat_events SET SCHEMA batchclaim;
ALTER TABLE heartbeat_sources SET SCHEMA batchclaim;
ALTER TABLE instances SET SCHEMA batchclaim;
ALTER TABLE owner_lock_events SET SCHEMA batchclaim;
ALTER TABLE owner_locks SET SCHEMA batchclaim;
ALTER TABLE retention_state SET SCHEMA batchclaim;
ALTER TABLE service_halts SET SCHEMA batchclaim;
ALTER TABLE service_id_claims SET SCHEMA batchclaim;
ALTER TABLE singleflight_entries SET SCHEMA batchclaim;
ALTER TABLE submission_attempts SET SCHEMA batchclaim;
ALTER VIEW batch_history SET SCHEMA batchclaim;
ALTER VIEW batch_row_attempts SET SCHEMA batchclaim;
ALTER VIEW service_id_claims_effective SET SCHEMA batchclaim;
ALTER SEQUENCE service_id_claim_epochs SET SCHEMA batchclaim;
ALTER SEQUENCE singleflight_epoch_seq SET SCHEMA batchclaim;
ALTER FUNCTION batchclaim_head_in_flight(text, uuid, bigint) SET SCHEMA batchclaim;
ALTER FUNCTION batchclaim_notify_work() SET SCHEMA batchclaim;
ALTER FUNCTION batchclaim_finished_at() SET SCHEMA batchclaim;
ALTER FUNCTION batchclaim_wake(text) SET SCHEMA batchclaim;
