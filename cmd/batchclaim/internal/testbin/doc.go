// Package testbin gives the CLI module's tests the batchclaim program to start as a process:
// the one named by $TEST_BATCHCLAIM_BINARY (make test builds bin/batchclaim once and names it
// there, so the packages that start the program share one build), else one built from this
// source the first time a test asks, shared by the test binary's tests.
package testbin
