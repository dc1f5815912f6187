package dltsim

import (
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// adminRoutes serves the simulator's own API under /_sim/.
func (s *Sim) adminRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /_sim/posts", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.Posts())
	})
	mux.HandleFunc("GET /_sim/committed", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.Committed())
	})
	mux.HandleFunc("GET /_sim/settled", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.Settled())
	})
	mux.HandleFunc("POST /_sim/restart", func(w http.ResponseWriter, _ *http.Request) {
		s.Restart()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /_sim/inject", s.adminInject)
	mux.HandleFunc("POST /_sim/pause", func(w http.ResponseWriter, r *http.Request) {
		on, err := strconv.ParseBool(r.URL.Query().Get("on"))
		if err != nil {
			http.Error(w, "pause: on must be true or false", http.StatusBadRequest)
			return
		}
		s.SetPaused(on)
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /_sim/commit", func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.Atoi(r.URL.Query().Get("n"))
		if err != nil || n < 0 {
			http.Error(w, "commit: n must be a non-negative integer", http.StatusBadRequest)
			return
		}
		writeJSON(w, http.StatusOK, map[string]int{"committed": s.CommitNext(n)})
	})
}

// adminInject serves POST /_sim/inject?status=CODE[&code=N]&n=N, ?timeout=D&n=N, ?drop=N,
// ?hide=D&n=N (InjectHiddenIntake) and ?clear=true.
func (s *Sim) adminInject(w http.ResponseWriter, r *http.Request) {
	if err := s.inject(r); err != nil {
		http.Error(w, "inject: "+err.Error(), http.StatusBadRequest)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Sim) inject(r *http.Request) error {
	q := r.URL.Query()
	count := func(name string) (int, error) {
		v := q.Get(name)
		if v == "" && name == "n" {
			return 1, nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%s=%q is not a non-negative integer", name, v)
		}
		return n, nil
	}
	switch {
	case q.Has("clear"):
		s.ClearFaults()
	case q.Has("status"):
		code, err := strconv.Atoi(q.Get("status"))
		if err != nil || code < 400 || code > 599 {
			return fmt.Errorf("status=%q is not an HTTP error status (400..599)", q.Get("status"))
		}
		n, err := count("n")
		if err != nil {
			return err
		}
		ecode := 0
		if q.Has("code") {
			if ecode, err = count("code"); err != nil {
				return err
			}
		}
		s.InjectError(code, ecode, n)
	case q.Has("timeout"):
		hold, err := time.ParseDuration(q.Get("timeout"))
		if err != nil || hold < 0 {
			return fmt.Errorf("timeout=%q is not a non-negative duration", q.Get("timeout"))
		}
		n, err := count("n")
		if err != nil {
			return err
		}
		s.InjectTimeouts(n, hold)
	case q.Has("hide"):
		hide, err := time.ParseDuration(q.Get("hide"))
		if err != nil || hide < 0 {
			return fmt.Errorf("hide=%q is not a non-negative duration", q.Get("hide"))
		}
		n, err := count("n")
		if err != nil {
			return err
		}
		s.InjectHiddenIntake(n, hide)
	case q.Has("drop"):
		n, err := count("drop")
		if err != nil {
			return err
		}
		s.InjectDroppedResponses(n)
	default:
		return fmt.Errorf("want status=CODE, timeout=DURATION, drop=N or clear=true")
	}
	return nil
}
