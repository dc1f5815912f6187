package dbtest

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// ExamplePool gives a runnable example (which has no testing.T) a pool on a fresh migrated
// database, and a func that closes it and drops the database. Call it from an Example in a
// package whose TestMain calls Main. Without a server an example cannot skip: it fails with
// the reason, like a test under REQUIRE_DB=1.
func ExamplePool() (pool *pgxpool.Pool, done func()) {
	tb := &exampleTB{}
	return NewPool(tb), tb.done
}

// exampleTB is the part of testing.TB that NewPool uses; a failure panics, which fails the
// example with the message.
type exampleTB struct {
	testing.TB
	cleanups []func()
}

func (e *exampleTB) Helper()                        {}
func (e *exampleTB) Context() context.Context       { return context.Background() }
func (e *exampleTB) Cleanup(f func())               { e.cleanups = append(e.cleanups, f) }
func (e *exampleTB) Fatal(a ...any)                 { panic(fmt.Sprint(a...)) }
func (e *exampleTB) Fatalf(format string, a ...any) { panic(fmt.Sprintf(format, a...)) }
func (e *exampleTB) Errorf(format string, a ...any) { fmt.Fprintf(os.Stderr, format+"\n", a...) }
func (e *exampleTB) Skipf(format string, a ...any)  { panic(fmt.Sprintf(format, a...)) }

func (e *exampleTB) done() {
	for i := len(e.cleanups) - 1; i >= 0; i-- {
		e.cleanups[i]()
	}
}
