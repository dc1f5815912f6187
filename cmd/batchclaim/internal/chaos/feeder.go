package chaos

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/ingest"
)

// arrivalInterval is how often a new batch arrives while faults run.
const arrivalInterval = 200 * time.Millisecond

// batchNumbers hands out each service_id's batch numbers (dlt.FakeBatch(service, n)), so that
// concurrent clients never store the same batch.
type batchNumbers struct {
	mu   sync.Mutex
	next map[string]int
}

func (b *batchNumbers) take(svc string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := b.next[svc]
	b.next[svc] = n + 1
	return n
}

// stored is what a client of the run knows about a batch it stored: when its transaction's
// COMMIT returned, how long the transaction was held open, and how it was stored.
type stored struct {
	done time.Time
	held time.Duration
	via  string
}

func (r *run) noteStored(svc string, n int, s stored) {
	id, _ := dlt.FakeBatch(svc, n)
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.stores[id]; !ok {
		r.stores[id] = s
	}
}

func serviceID(i int) string { return fmt.Sprintf("svc-%03d", i) }

// enqueueInitial stores the first batches of every service_id in one transaction.
func (r *run) enqueueInitial(ctx context.Context) error {
	tx, err := r.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit
	for range r.cfg.Batches {
		for s := range r.cfg.ServiceIDs {
			svc := serviceID(s)
			id, list := dlt.FakeBatch(svc, r.numbers.take(svc))
			if _, err := ingest.Enqueue(ctx, tx, svc, id, list); err != nil {
				return err
			}
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	for s := range r.cfg.ServiceIDs {
		for n := range r.cfg.Batches {
			r.noteStored(serviceID(s), n, stored{done: time.Now(), via: "initial"})
		}
	}
	return nil
}

// enqueueDirect stores one batch straight in the database, holding the transaction open for
// hold before it commits (a slow client).
func (r *run) enqueueDirect(ctx context.Context, svc string, n int, hold time.Duration) error {
	err := r.heldTx(ctx, hold+5*time.Second, hold, func(ctx context.Context, tx pgx.Tx) error {
		id, list := dlt.FakeBatch(svc, n)
		_, err := ingest.Enqueue(ctx, tx, svc, id, list)
		return err
	})
	if err != nil {
		return err
	}
	r.noteStored(svc, n, stored{done: time.Now(), held: hold, via: "database"})
	return nil
}

// enqueueBulk stores one batch of each service_id (numbers ns) in one call of
// ingest.EnqueueMany, with the first one repeated at the end, inside a transaction held open
// for hold: a bulk enqueue racing the single ones of the same service_ids. The repeat must be
// reported a duplicate of the first, with its seq.
func (r *run) enqueueBulk(ctx context.Context, svcs []string, ns []int, hold time.Duration) error {
	// Its statement waits for the enqueue locks of every service_id, which the held single
	// enqueues (up to 5 of up to 2 s each per service_id) keep in turn.
	err := r.heldTx(ctx, hold+20*time.Second, hold, func(ctx context.Context, tx pgx.Tx) error {
		jobs := make([]ingest.Job, 0, len(svcs)+1)
		for i, svc := range svcs {
			id, list := dlt.FakeBatch(svc, ns[i])
			jobs = append(jobs, ingest.Job{ServiceID: svc, BatchID: id, Payload: list})
		}
		jobs = append(jobs, jobs[0])
		st, err := ingest.EnqueueMany(ctx, tx, jobs)
		if err != nil {
			return err
		}
		if last := st[len(st)-1]; last.New || last.Seq != st[0].Seq {
			r.mu.Lock()
			r.bulkReports = append(r.bulkReports, fmt.Sprintf("%s: the repeat of batch %s in one EnqueueMany came back %+v, want a duplicate of seq %d",
				jobs[0].ServiceID, jobs[0].BatchID, last, st[0].Seq))
			r.mu.Unlock()
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i, svc := range svcs {
		r.noteStored(svc, ns[i], stored{done: time.Now(), held: hold, via: "bulk enqueue (EnqueueMany)"})
	}
	return nil
}

// heldTx runs store in a transaction, holds the transaction open for hold and commits it,
// all within timeout.
func (r *run) heldTx(ctx context.Context, timeout, hold time.Duration, store func(context.Context, pgx.Tx) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tx, err := r.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // no-op after commit
	if err := store(ctx, tx); err != nil {
		return err
	}
	if hold > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(hold):
		}
	}
	return tx.Commit(ctx)
}

// enqueueVia stores one batch through an instance's ingest API.
func (r *run) enqueueVia(ctx context.Context, in *instance, svc string, n int) error {
	in.mu.Lock()
	addr := in.listen
	in.mu.Unlock()
	_, list := dlt.FakeBatch(svc, n)
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/batches?service_id="+svc, bytes.NewReader(list))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("ingest via %s: %s", addr, resp.Status)
	}
	r.noteStored(svc, n, stored{done: time.Now(), via: "ingest API of " + in.name})
	return nil
}

// feed keeps batches arriving, one every arrivalInterval for a random service_id, until ctx
// ends. A batch that could not be stored is tried again (its number is kept) before that
// service_id gets a new one.
func (r *run) feed(ctx context.Context, rng *rand.Rand) {
	retry := map[string]int{}
	t := time.NewTicker(arrivalInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		svc := serviceID(rng.IntN(r.cfg.ServiceIDs))
		n, ok := retry[svc]
		if !ok {
			n = r.numbers.take(svc)
		}
		if err := r.enqueueDirect(ctx, svc, n, 0); err != nil {
			retry[svc] = n
			continue
		}
		delete(retry, svc)
		r.arrived.Add(1)
	}
}

// concurrentEnqueue has several clients store batches of the same service_ids at once:
// through the ingest APIs of different instances, straight in the database inside
// transactions held open for a while, and one bulk enqueue of a batch of each service_id in
// a transaction held open too. It returns a description.
func (r *run) concurrentEnqueue(ctx context.Context, rng *rand.Rand) string {
	services := 1 + rng.IntN(3)
	clients := 3 + rng.IntN(3)
	var wg sync.WaitGroup
	var mu sync.Mutex
	stored, long := 0, 0
	var bulkSvcs []string
	var bulkNs []int
	for range services {
		svc := serviceID(rng.IntN(r.cfg.ServiceIDs))
		if !slices.Contains(bulkSvcs, svc) {
			bulkSvcs, bulkNs = append(bulkSvcs, svc), append(bulkNs, r.numbers.take(svc))
		}
		for c := range clients {
			n := r.numbers.take(svc)
			hold := time.Duration(0)
			var via *instance
			if c%2 == 0 {
				hold = time.Duration(200+rng.IntN(1800)) * time.Millisecond
			} else {
				via = r.instances[rng.IntN(len(r.instances))]
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				var err error
				if via != nil {
					err = r.enqueueVia(ctx, via, svc, n)
				}
				if via == nil || err != nil {
					err = r.enqueueDirect(ctx, svc, n, hold)
				}
				if err == nil {
					mu.Lock()
					stored++
					if hold > 0 {
						long++
					}
					mu.Unlock()
					r.arrived.Add(1)
				}
			}()
		}
	}
	bulk := "stored"
	if err := r.enqueueBulk(ctx, bulkSvcs, bulkNs, bulkHold); err != nil {
		bulk = "not stored: " + err.Error()
	} else {
		r.arrived.Add(int64(len(bulkSvcs)))
	}
	wg.Wait()
	return fmt.Sprintf("%d clients x %d service_ids, %d stored (%d in transactions held open); a bulk enqueue of one batch each %s",
		clients, services, stored, long, bulk)
}

// bulkHold is how long concurrentEnqueue's bulk enqueue holds its transaction open.
const bulkHold = 500 * time.Millisecond
