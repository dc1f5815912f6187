package observer_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/observer"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// Cancel and Retry change one job from outside the instances: a job that has not run is
// cancelled, and a finished one runs again. Each is one conditional write, so a job in
// another state is left alone and the error says which state it is in.
func ExampleCancel() {
	pool, drop := dbtest.ExamplePool()
	defer drop()
	ctx := context.Background()
	st, err := ingest.Enqueue(ctx, pool, "report-7", "monthly", nil, ingest.RunAt(time.Now().Add(time.Hour)))
	if err != nil {
		panic(err)
	}

	c, err := observer.Cancel(ctx, pool, st.Seq, "replaced by a weekly report")
	fmt.Println(c.From, "->", c.To, err)
	_, err = observer.Cancel(ctx, pool, st.Seq, "")
	fmt.Println(errors.Is(err, batchclaim.ErrStateChanged))
	c, err = observer.Retry(ctx, pool, st.Seq)
	fmt.Println(c.From, "->", c.To, err)
	// Output:
	// NEW -> CANCELLED <nil>
	// true
	// CANCELLED -> NEW <nil>
}
