package dlt

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/batchclaim/batchclaim"
)

// fetchFunc asks the ledger about one group of distinct, valid ids, asking it to hold its
// answer for up to wait seconds (0: no wait parameter).
type fetchFunc func(ctx context.Context, ids []string, wait int) ([]batchclaim.LedgerStatus, error)

// statuses validates and dedupes ids, asks for them in groups of at most size ids with at
// most t.concurrency requests at once, and returns one status per distinct id in order. Ids
// the ledger did not mention are UNKNOWN; an id it mentions without having been asked is an
// error. A positive wait, rounded up to whole seconds, is a deadline for the whole call: each
// group asks the ledger to wait for what is left of it when its request starts.
func (t *transport) statuses(ctx context.Context, ids []string, wait time.Duration, size int, fetch fetchFunc) ([]batchclaim.LedgerStatus, error) {
	ids, err := distinctIDs(ids)
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	var groups [][]string
	for len(ids) > 0 {
		n := min(size, len(ids))
		groups = append(groups, ids[:n:n])
		ids = ids[n:]
	}
	var deadline time.Time
	if wait > 0 {
		now := time.Now()
		deadline = now.Add(time.Duration(waitSeconds(now.Add(wait), now)) * time.Second)
	}
	answers, err := t.fanOut(ctx, groups, deadline, fetch)
	if err != nil {
		return nil, err
	}
	var out []batchclaim.LedgerStatus
	for i, g := range groups {
		byID := make(map[string]batchclaim.LedgerStatus, len(answers[i]))
		for _, st := range answers[i] {
			byID[st.ID] = st
		}
		for _, id := range g {
			st, ok := byID[id]
			if !ok {
				st = batchclaim.LedgerStatus{ID: id, Status: batchclaim.StatusUnknown}
			}
			out = append(out, st)
		}
	}
	return out, nil
}

// fanOut runs fetch for every group with bounded concurrency and checks that each answer
// names only asked ids. The first failure cancels the rest. A non-zero deadline is passed
// on as the seconds left until it, rounded up, when each request starts.
func (t *transport) fanOut(ctx context.Context, groups [][]string, deadline time.Time, fetch fetchFunc) ([][]batchclaim.LedgerStatus, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	answers := make([][]batchclaim.LedgerStatus, len(groups))
	sem := make(chan struct{}, t.concurrency)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if firstErr == nil {
			firstErr = err
			cancel()
		}
	}
	for i, g := range groups {
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
			case <-ctx.Done():
				fail(fmt.Errorf("batch statuses: %w", ctx.Err()))
				return
			}
			sts, err := fetch(ctx, g, waitSeconds(deadline, time.Now()))
			if err == nil {
				err = checkAnswered(g, sts)
			}
			if err != nil {
				fail(fmt.Errorf("batch statuses: %w", err))
				return
			}
			answers[i] = sts
		})
	}
	wg.Wait()
	return answers, firstErr
}

// waitSeconds is the wait parameter for a request started at now: the whole seconds left
// until deadline, rounded up; 0 for a zero or past deadline.
func waitSeconds(deadline, now time.Time) int {
	if deadline.IsZero() || !now.Before(deadline) {
		return 0
	}
	left := deadline.Sub(now)
	secs := left / time.Second
	if left%time.Second != 0 {
		secs++
	}
	return int(secs)
}

// waitParam is the query suffix asking the ledger to wait up to secs seconds; "" for 0.
func waitParam(secs int) string {
	if secs <= 0 {
		return ""
	}
	return "&wait=" + strconv.Itoa(secs)
}

// checkAnswered rejects an answer naming an id that was not asked for.
func checkAnswered(asked []string, sts []batchclaim.LedgerStatus) error {
	set := make(map[string]bool, len(asked))
	for _, id := range asked {
		set[id] = true
	}
	for _, st := range sts {
		if !set[st.ID] {
			return fmt.Errorf("ledger answered about batch id %q that was not asked for", excerpt(st.ID, 140))
		}
	}
	return nil
}

// distinctIDs checks every id and drops repeats, keeping the first occurrence's place.
func distinctIDs(ids []string) ([]string, error) {
	seen := make(map[string]bool, len(ids))
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if !batchclaim.ValidBatchID(id) {
			return nil, fmt.Errorf("batch statuses: id %q is not 128 lowercase hex characters", excerpt(id, 140))
		}
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out, nil
}
