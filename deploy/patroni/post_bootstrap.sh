#!/bin/sh
# Run once by Patroni on the first leader: the database, the least-privilege roles of
# deploy/roles.sql (mounted at /etc/patroni/roles.sql, or $ROLES_SQL; docs/operations.md,
# "Least privilege") with their passwords, and the per-role settings PgBouncer cannot pass
# on as startup parameters (docs/operations.md, "Behind PgBouncer"). Set lock_timeout to R
# and idle_in_transaction_session_timeout to T1/5 of the instances' timings (here the
# defaults: R = 5s, T1 = 30s). batchclaim_owner migrates (straight to the members);
# batchclaim_app is what the instances connect as, through the PgBouncers.
set -e
psql -v ON_ERROR_STOP=1 -d postgres -c 'CREATE DATABASE batchclaim'
psql -v ON_ERROR_STOP=1 -d batchclaim -f "${ROLES_SQL:-/etc/patroni/roles.sql}"
psql -v ON_ERROR_STOP=1 -d batchclaim \
  --set owner_password="${BATCHCLAIM_OWNER_PASSWORD:?set BATCHCLAIM_OWNER_PASSWORD}" \
  --set app_password="${BATCHCLAIM_APP_PASSWORD:?set BATCHCLAIM_APP_PASSWORD}" <<'SQL'
ALTER ROLE batchclaim_owner PASSWORD :'owner_password';
ALTER ROLE batchclaim_app PASSWORD :'app_password';
ALTER ROLE batchclaim_app SET lock_timeout = '5s';
ALTER ROLE batchclaim_app SET idle_in_transaction_session_timeout = '6s';
SQL
