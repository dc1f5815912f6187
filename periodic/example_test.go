package periodic_test

import (
	"context"
	"fmt"
	"time"

	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/periodic"
	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// A job every second, stored by a Scheduler (node.Config.Periodic runs one on every node).
// Every instance given the same job stores each tick once between them; the tick's job id
// says which tick it is, and it runs under its key like any other job.
func Example() {
	pool, drop := dbtest.ExamplePool()
	defer drop()
	db, err := pgdb.Open(pool, "")
	if err != nil {
		panic(err)
	}

	stored := make(chan string, 8)
	s, err := periodic.New(db, periodic.Config{
		Jobs: []periodic.Job{
			{Name: "heartbeat", Schedule: periodic.Every(time.Second), Payload: []byte(`{"ping":true}`)},
			{Name: "nightly-report", Schedule: periodic.MustCron("0 2 * * *"), ServiceID: "reports"},
		},
		Enqueued: func(name string, tick time.Time, st ingest.Stored) { stored <- st.BatchID },
	})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	id := <-stored
	cancel()
	<-done
	fmt.Println(id[:len("periodic/heartbeat/")], len(id) == len("periodic/heartbeat/2006-01-02T15:04:05Z"))

	list, err := periodic.List(context.Background(), pool)
	if err != nil {
		panic(err)
	}
	for _, j := range list {
		fmt.Printf("%s: %s under %s, next run set: %v\n", j.Name, j.Schedule, j.ServiceID, j.NextRun != nil)
	}
	// Output:
	// periodic/heartbeat/ true
	// heartbeat: every 1s under periodic/heartbeat, next run set: true
	// nightly-report: cron 0 2 * * * under reports, next run set: true
}
