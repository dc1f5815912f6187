// Package testutil holds the helpers the project's tests share: waiting for a condition
// (WaitFor), counting the JSON log lines one log site wrote (SiteLines), running the test
// binary itself as a child process (StartChild), and finding the go command (GoTool).
//
// WaitFor polls a condition every PollInterval until it holds and fails the test, naming what
// it waited for, once its bound has passed; tests use it instead of sleeping for state. The
// bound is for a stalled run only, so it should be generous.
//
// SiteLines counts the lines of a log site in a JSON log (log/slog's JSONHandler), including
// the count lines a throttle (httpguard.Throttle) writes for it, so that a test can bound how
// many lines a flood of failures wrote.
//
// StartChild runs the test binary again with no test selected; the package's TestMain sees
// the variables in ChildConfig.Env and does the child's work instead of running tests. A
// Child collects its output line by line (Line, Said, SaidPrefix), takes input (Stdin) and
// signals (Signal), and is killed and waited for when the test ends. Fault tests use it for a
// process that can be frozen (SIGSTOP) or killed while it holds a lease.
//
// GoTool is the go command from PATH, else GOROOT's, for a test that lists packages or runs
// a build with other tags (the layer check of the docs, the nodocker build).
//
// The package belongs to the test kit (docs/architecture.md, "Layers"): tests import it, a
// running instance never does.
package testutil
