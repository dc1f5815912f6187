package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/database"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/subproc"
)

// demoClaims: three instances (separate processes) share service_ids; once they are
// balanced the one holding the most is killed with SIGKILL and the others take its claims.
func demoClaims(ctx context.Context, instances, serviceIDs int, keep bool, stdout io.Writer) error {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	db, err := database.NewScratch(ctx, "batchclaim_demo", keep, stdout, logger)
	if err != nil {
		return err
	}
	defer db.Close(ctx)
	pool, err := database.Open(ctx, db.URL, 4)
	if err != nil {
		return err
	}
	defer pool.Close()
	ids := make([]string, serviceIDs)
	for i := range ids {
		ids[i] = fmt.Sprintf("service-%04d", i)
	}
	if err := claims.RegisterServiceIDs(ctx, pool, ids...); err != nil {
		return err
	}
	logDir, err := os.MkdirTemp("", "batchclaim-demo-")
	if err != nil {
		return err
	}
	const t1, t2 = 1500 * time.Millisecond, 6 * time.Second
	fmt.Fprintf(stdout, "%d instances, %d service_ids, renew every 200ms, expiry-1 %s, expiry-2 %s; logs in %s\n\n",
		instances, serviceIDs, t1, t2, logDir)
	kids := map[string]*subproc.Child{}
	defer func() {
		for _, k := range kids {
			k.Stop(5 * time.Second)
		}
	}()
	for i := 1; i <= instances; i++ {
		name := fmt.Sprintf("instance-%d", i)
		k, err := subproc.Start(name, filepath.Join(logDir, name+".log"), "run", "--database-url", db.URL,
			"--instance-name", name, "--claims-only", "--renew-interval", "200ms", "--expiry-1", t1.String(), "--expiry-2", t2.String())
		if err != nil {
			return err
		}
		kids[name] = k
	}

	start := time.Now()
	var victim string
	var killedAt time.Time
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		for name, k := range kids {
			if name != victim && k.Exited() {
				return fmt.Errorf("%s exited unexpectedly (%v); see %s", name, k.Err, logDir)
			}
		}
		snap, err := claims.ReadSnapshot(ctx, pool, 0)
		if err != nil {
			return err
		}
		held := map[string]int64{}
		var line []string
		for _, in := range snap.Instances {
			held[in.Name] = in.Claims
			mark := ""
			if in.Name == victim {
				mark = " (killed)"
			}
			line = append(line, fmt.Sprintf("%s: %3d%s", in.Name, in.Claims, mark))
		}
		sort.Strings(line)
		fmt.Fprintf(stdout, "t=%4.1fs  %s  unclaimed: %d\n", time.Since(start).Seconds(), strings.Join(line, "  "), snap.Unclaimed)

		survivors := balanced(held, victim, len(kids))
		switch {
		case victim == "" && snap.Unclaimed == 0 && survivors:
			victim = mostClaims(held)
			if err := kids[victim].Signal(syscall.SIGKILL); err != nil {
				return err
			}
			killedAt = time.Now()
			fmt.Fprintf(stdout, "\n>>> SIGKILL %s, which held %d claims\n\n", victim, held[victim])
		case victim != "" && snap.Unclaimed == 0 && held[victim] == 0 && survivors:
			fmt.Fprintf(stdout, "\nevery service_id is held again by the survivors, %.1fs after the kill (expiry-1 is %s)\n",
				time.Since(killedAt).Seconds(), t1)
			return nil
		case time.Since(start) > time.Minute:
			return errors.New("no takeover within a minute; see the instance logs in " + logDir)
		}
	}
}

// balanced reports whether every instance but the victim is registered and the counts
// among them differ by at most one.
func balanced(held map[string]int64, victim string, want int) bool {
	var counts []int64
	for name, n := range held {
		if name != victim {
			counts = append(counts, n)
		}
	}
	if victim != "" {
		want--
	}
	if len(counts) != want {
		return false
	}
	sort.Slice(counts, func(i, j int) bool { return counts[i] < counts[j] })
	return counts[len(counts)-1]-counts[0] <= 1
}

func mostClaims(held map[string]int64) string {
	best, bestN := "", int64(-1)
	for name, n := range held {
		if n > bestN || (n == bestN && name < best) {
			best, bestN = name, n
		}
	}
	return best
}
