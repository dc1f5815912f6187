package dltsim

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/dlt"
)

// What an INVALID batch's transactions report.
const (
	invalidMessage = "simulated invalid transaction"
	invalidData    = "dltsim"
)

func (s *Sim) routes() http.Handler {
	mux := http.NewServeMux()
	if s.cfg.Flavor == dlt.FlavorScabbard {
		scabbardAPI{s}.routes(mux)
	} else {
		sawtoothAPI{s}.routes(mux)
	}
	s.adminRoutes(mux)
	return mux
}

// parseWait reads the wait parameter: absent, empty or "false" is 0; an integer is seconds,
// at most WaitDefault (the answer's write deadline moves by the wait); anything else means
// WaitDefault.
func parseWait(r *http.Request) time.Duration {
	v := r.URL.Query().Get("wait")
	if v == "" || strings.EqualFold(v, "false") {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return WaitDefault
	}
	if n > int(WaitDefault/time.Second) { // compared before the product, which could overflow
		return WaitDefault
	}
	return time.Duration(max(n, 0)) * time.Second
}

// waitFor reports ids, re-checking every interval until all are settled, wait has passed,
// the client went away or the Sim closed; it then returns the last known statuses.
func (s *Sim) waitFor(ctx context.Context, ids []string, wait, interval time.Duration,
	settled func(batchclaim.Status) bool) []view {
	views := s.views(ids)
	if wait <= 0 {
		return views
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for !allSettled(views, settled) {
		select {
		case <-ctx.Done():
			return views
		case <-s.done:
			return views
		case <-deadline.C:
			return s.views(ids)
		case <-tick.C:
			views = s.views(ids)
		}
	}
	return views
}

func allSettled(views []view, settled func(batchclaim.Status) bool) bool {
	for _, v := range views {
		if !settled(v.status) {
			return false
		}
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
