DROP TABLE IF EXISTS election_events;
DROP TABLE IF EXISTS election_terms;
DROP TABLE IF EXISTS election_members;
