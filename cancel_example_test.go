package batchclaim_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/batchclaim/batchclaim"
)

// A running job learns that it was cancelled (node.Cancel of an INFLIGHT job) from its
// context's cause, and may stop at once: once it returns, its job becomes CANCELLED unless
// it returned Done.
func ExampleCancelled() {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(batchclaim.CancelCause("superseded by a newer export")) // what the node does on a cancel
	<-ctx.Done()
	fmt.Println(batchclaim.Cancelled(ctx), errors.Is(context.Cause(ctx), batchclaim.ErrCancelled))
	fmt.Println(context.Cause(ctx))
	// Output:
	// true true
	// job cancelled: superseded by a newer export
}
