package failover_test

import (
	"context"
	"fmt"
	"time"

	"github.com/batchclaim/batchclaim/testkit/dbtest"

	"github.com/batchclaim/batchclaim/patterns/failover"
	"github.com/batchclaim/batchclaim/pgdb"
)

// A shard of three nodes: p is the primary, a (progress 90) and b (progress 95) replicate
// it. p heartbeats once and then stops, as if its process died. After their patience, a
// replica takes the failover lock, picks b (the most up to date), records the decision at
// epoch 2 and sends b its promote command and a its REPLICAOF; b takes over.
func Example() {
	pool, drop := dbtest.ExamplePool()
	defer drop()
	db, err := pgdb.Open(pool, "")
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	config := func(id string, progress int64) failover.Config {
		return failover.Config{
			Shard: "users-1", NodeID: id, Address: id + ".internal:6379", LastTxnID: progress,
			HeartbeatInterval: 100 * time.Millisecond, // the primary's lease is 3 of these,
			Patience:          time.Second,            // a replica's patience this plus up to 500ms.
		}
	}
	p := must(failover.New(db, failover.Config{Shard: "users-1", NodeID: "p", Bootstrap: true, LastTxnID: 100,
		HeartbeatInterval: 100 * time.Millisecond, Patience: time.Second}))
	if err := p.Heartbeat(ctx); err != nil { // bootstraps the shard: p is primary at epoch 1
		panic(err)
	}
	fmt.Printf("p: %s at epoch %d\n", p.State().Role, p.State().Epoch)

	a := must(failover.New(db, config("a", 90)))
	b := must(failover.New(db, config("b", 95)))
	for _, n := range []*failover.Node{a, b} {
		go n.Run(ctx) //nolint:errcheck // ends with ctx
	}
	deadline := time.Now().Add(30 * time.Second)
	for !(b.State().Acting && a.State().PrimaryID == "b") && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	sb, sa := b.State(), a.State()
	fmt.Printf("b: %s at epoch %d\n", sb.Role, sb.Epoch)
	fmt.Printf("a: %s of %s (%s) at epoch %d\n", sa.Role, sa.PrimaryID, sa.PrimaryAddress, sa.Epoch)

	// p comes back: its next heartbeat finds epoch 2 and makes it a replica of b.
	if err := p.Heartbeat(ctx); err != nil {
		panic(err)
	}
	fmt.Printf("p: %s of %s at epoch %d\n", p.State().Role, p.State().PrimaryID, p.State().Epoch)
	// Output:
	// p: primary at epoch 1
	// b: primary at epoch 2
	// a: replica of b (b.internal:6379) at epoch 2
	// p: replica of b at epoch 2
}

func must(n *failover.Node, err error) *failover.Node {
	if err != nil {
		panic(err)
	}
	return n
}
