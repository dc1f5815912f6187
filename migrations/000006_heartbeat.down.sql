DROP TABLE IF EXISTS heartbeat_events;
DROP TABLE IF EXISTS heartbeat_sources;
DROP TABLE IF EXISTS heartbeat_event_types;
DROP TABLE IF EXISTS heartbeat_config;
