// Package dbclock is the one test hook for the database clock. Every expiry in batchclaim is
// written and compared in SQL with the database's time, so a test that wants one process to
// see another's lease as expired moves that process's view of the database clock instead of
// sleeping. Its statements take the time as an optional parameter: nil means the database's
// own clock, anything else is that clock shifted by the Clock.
//
// claims.Engine, election.Elector and lock.Locker each keep a Clock and expose it as their
// ShiftDBTime method; production code never shifts one. A new pattern does the same
// (docs/architecture.md, "Where to add").
package dbclock
