#!/bin/sh
# Run once by Patroni on the first leader: the application's role and database, and the
# per-role settings PgBouncer cannot pass on as startup parameters (docs/operations.md,
# "Behind PgBouncer"). Set lock_timeout to R and idle_in_transaction_session_timeout to T1/5
# of the instances' timings (here the defaults: R = 5s, T1 = 30s).
set -e
psql -v ON_ERROR_STOP=1 -d postgres <<SQL
CREATE ROLE batchclaim LOGIN PASSWORD '${BATCHCLAIM_DB_PASSWORD:-change-me}';
CREATE DATABASE batchclaim OWNER batchclaim;
ALTER ROLE batchclaim SET lock_timeout = '5s';
ALTER ROLE batchclaim SET idle_in_transaction_session_timeout = '6s';
SQL
