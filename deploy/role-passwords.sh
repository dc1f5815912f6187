#!/bin/sh
# Sets the passwords of the roles deploy/roles.sql created, from the environment; the
# Postgres image runs it once, after roles.sql, on the database's first start (see
# compose.yaml). Elsewhere, set them with \password in psql.
set -eu
psql -v ON_ERROR_STOP=1 --username "${POSTGRES_USER:-postgres}" --dbname "${POSTGRES_DB:-postgres}" \
  --set owner_password="$BATCHCLAIM_OWNER_PASSWORD" --set app_password="$BATCHCLAIM_APP_PASSWORD" <<'SQL'
ALTER ROLE batchclaim_owner PASSWORD :'owner_password';
ALTER ROLE batchclaim_app PASSWORD :'app_password';
SQL
