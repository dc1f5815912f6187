DROP TABLE IF EXISTS failover_commands;
DROP TABLE IF EXISTS failover_decision_nodes;
DROP TABLE IF EXISTS failover_decisions;
DROP TABLE IF EXISTS failover_roles;
DROP TABLE IF EXISTS failover_nodes;
DROP TABLE IF EXISTS failover_shards;
DROP TABLE IF EXISTS owner_lock_events;
DROP TABLE IF EXISTS owner_locks;
