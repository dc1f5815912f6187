// Package pgsource finds a Postgres server to use, trying in order: a URL from an environment
// variable (DATABASE_URL for the demo, TEST_DATABASE_URL for tests), a throwaway cluster from
// local PostgreSQL binaries (package pglocal), and a postgres:15-alpine container through
// testcontainers-go when a Docker engine answers. When none works the error says how to
// provide one. The demo (Acquire) and the test harness (package dbtest, through Server) share
// this chain. WaitDatabase waits until every host of a multi-host URL has a database just
// created on its primary.
//
// A build with the nodocker tag (the release image's daemon, deploy/Dockerfile) has no
// container step, and with it none of testcontainers-go and the Docker client: its error then
// names the other two ways and says that the build has no Docker fallback.
package pgsource
