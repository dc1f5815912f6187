-- Least-privilege roles for batchclaim (docs/operations.md, "Least privilege"). Run it once,
-- as a superuser (or a role with CREATEROLE that owns the database), connected to the
-- database batchclaim uses, before the first `batchclaim migrate up`:
--
--   psql -d batchclaim -v ON_ERROR_STOP=1 -f deploy/roles.sql
--
-- then give the login roles their passwords (\password batchclaim_owner, ...), or
-- certificates. The names are the ones the deployment files use; change them here and
-- there together.
--
--   batchclaim_owner   `batchclaim migrate`: owns the schema batchclaim and its tables
--   batchclaim_app     `batchclaim run` (and embedding services): reads and writes rows of
--                      those tables, uses their sequences; cannot create, alter or drop
--   batchclaim_status  `batchclaim status` and `batchclaim ui`: reads only (the status
--                      page's Resume needs DELETE on service_halts: see the docs)

CREATE ROLE batchclaim_owner LOGIN;
CREATE ROLE batchclaim_app LOGIN;
CREATE ROLE batchclaim_status LOGIN;

DO $$
BEGIN
  EXECUTE format('GRANT CONNECT ON DATABASE %I TO batchclaim_owner, batchclaim_app, batchclaim_status', current_database());
END
$$;

-- batchclaim's own schema (docs/schema.md), owned by the owner role, so that only it creates
-- objects there; the application's schemas, public included, are left as they are. A
-- deployment with another schema (--schema) changes the name here.
CREATE SCHEMA IF NOT EXISTS batchclaim AUTHORIZATION batchclaim_owner;
GRANT USAGE ON SCHEMA batchclaim TO batchclaim_app, batchclaim_status;

-- Every table and sequence the owner's migrations create from now on.
ALTER DEFAULT PRIVILEGES FOR ROLE batchclaim_owner IN SCHEMA batchclaim
  GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO batchclaim_app;
ALTER DEFAULT PRIVILEGES FOR ROLE batchclaim_owner IN SCHEMA batchclaim
  GRANT USAGE, SELECT ON SEQUENCES TO batchclaim_app;
ALTER DEFAULT PRIVILEGES FOR ROLE batchclaim_owner IN SCHEMA batchclaim
  GRANT SELECT ON TABLES TO batchclaim_status;
