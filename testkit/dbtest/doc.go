// Package dbtest hands tests a real, migrated Postgres database. It is a normal package so
// that the tests of every other package can import it; nothing else should.
//
// The server is, in order (package pgsource): TEST_DATABASE_URL when set (an admin URL to a
// server where the tests may CREATE DATABASE; CI sets it), else a throwaway cluster started
// from local PostgreSQL binaries (package pglocal), else a postgres:15-alpine container
// through testcontainers-go when Docker answers. Nothing is started until a test asks for a
// database, so test binaries that never do start nothing.
//
// The first test that asks creates a template database, bctpl_<pid>_<random>, migrates it
// with migrations.Up, and closes it to connections. NewDB then gives each test its own
// CREATE DATABASE ... TEMPLATE copy, bct_<pid>_<random>_<n>, dropped WITH (FORCE) when the
// test ends; NewPool wraps it in a pool closed before the drop. Copies within a binary are
// serialized (Postgres refuses to copy a template another session uses) and retried while
// the template is busy. Because names are unique per test binary and nothing assumes an
// empty server, `go test ./...` runs packages in parallel against one server.
//
// Without a server the test is skipped with the reason; with REQUIRE_DB=1 (CI) it fails
// instead. A server that is there but cannot hold the template (no CREATEDB, a broken
// migration) always fails the test.
//
// Packages that use dbtest must call Main from TestMain, which drops the template and stops a
// throwaway server after the tests:
//
//	func TestMain(m *testing.M) { dbtest.Main(m) }
//
// AdminURL gives tests the server itself (extra databases, pg_terminate_backend). Cluster
// returns the throwaway cluster when that is the server, so fault tests can restart Postgres;
// it is nil otherwise, and such tests may start a pglocal cluster of their own.
package dbtest
