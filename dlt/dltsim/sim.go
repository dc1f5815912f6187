package dltsim

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/httpguard"
)

// Sim is a simulated ledger. Its methods are safe for concurrent use.
type Sim struct {
	cfg     Config
	log     *slog.Logger
	handler http.Handler
	done    chan struct{}

	mu     sync.Mutex
	ledger *ledger
	faults faults
	posts  []Post
	seq    int
	srv    *http.Server
	closed bool
}

// New returns a simulator. It does no I/O; serve Handler yourself or call Start.
func New(cfg Config) (*Sim, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Sim{
		cfg:    cfg,
		log:    cfg.Logger.With("flavor", string(cfg.Flavor)),
		done:   make(chan struct{}),
		ledger: newLedger(cfg),
	}
	s.handler = s.routes()
	return s, nil
}

// Flavor returns the simulated API.
func (s *Sim) Flavor() dlt.Flavor { return s.cfg.Flavor }

// Handler serves the ledger API and the admin API under /_sim/.
func (s *Sim) Handler() http.Handler { return s.handler }

// Start serves Handler on addr (e.g. "127.0.0.1:0") and returns the base URL: the REST API
// root for sawtooth, the node URL for scabbard. It serves through the listener every
// batchclaim server uses (httpguard.Listen): a Host that is not an IP address, localhost,
// addr's host or one of Config.AllowedHosts gets 421, a browser's cross-origin POST (to the
// admin API above all) 403, and the listener's timeouts and limits hold.
func (s *Sim) Start(addr string) (baseURL string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil || s.closed {
		return "", errors.New("dltsim: already started or closed")
	}
	srv, bound, err := httpguard.Start(httpguard.Config{Addr: addr, Handler: s.handler, AllowedHosts: s.cfg.AllowedHosts, Logger: s.log})
	if err != nil {
		return "", fmt.Errorf("dltsim: %w", err)
	}
	s.srv = srv
	return "http://" + bound, nil
}

// Listen is Start on a free loopback port.
func (s *Sim) Listen() (baseURL string, err error) { return s.Start("127.0.0.1:0") }

// Close stops the server started by Start and releases held requests.
func (s *Sim) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.done)
	srv := s.srv
	s.mu.Unlock()
	if srv == nil {
		return nil
	}
	return srv.Close()
}

// Posts returns the record of every POST so far.
func (s *Sim) Posts() []Post {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.posts)
}

// Committed returns the committed batch ids in commit order.
func (s *Sim) Committed() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ledger.advance(s.cfg.Now())
	return slices.Clone(s.ledger.chain)
}

// Settled returns every settlement so far, in order.
func (s *Sim) Settled() []Settlement {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ledger.advance(s.cfg.Now())
	return slices.Clone(s.ledger.settled)
}

// Status returns what the API would answer about id now.
func (s *Sim) Status(id string) batchclaim.Status {
	return s.views([]string{id})[0].status
}

// Queued returns the number of batches waiting to settle.
func (s *Sim) Queued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ledger.advance(s.cfg.Now())
	return len(s.ledger.queue)
}

// Restart simulates a restart of the ledger node: queued batches are lost and never commit,
// INVALID statuses are forgotten, scabbard loses its whole history; the chain survives.
func (s *Sim) Restart() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ledger.advance(s.cfg.Now())
	s.ledger.restart()
	s.log.Info("simulated restart")
}

// SetCommitLatency changes the commit latency; it applies to queued batches too.
func (s *Sim) SetCommitLatency(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ledger.latency = max(d, 0)
}

// SetPaused stops (true) or resumes (false) settling batches, so that the queue fills.
func (s *Sim) SetPaused(paused bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !paused {
		s.ledger.paused = false
	}
	s.ledger.advance(s.cfg.Now())
	s.ledger.paused = paused
}

// CommitNext settles the next n queued batches at once, in order, even when paused, and
// returns how many it settled.
func (s *Sim) CommitNext(n int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ledger.commitNext(n, s.cfg.Now())
}

// views reports the given ids as the API would, after letting time pass.
func (s *Sim) views(ids []string) []view {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.Now()
	s.ledger.advance(now)
	out := make([]view, len(ids))
	for i, id := range ids {
		out[i] = s.ledger.view(id, now)
	}
	return out
}

// invalid decides, from the seed and the id alone, whether a batch comes out INVALID.
func (s *Sim) invalid(id string) bool {
	if s.cfg.InvalidRate <= 0 {
		return false
	}
	return s.fraction(id, "") < s.cfg.InvalidRate
}

// fraction is a number in [0, 1) that the seed, the batch id and the purpose decide.
func (s *Sim) fraction(id, purpose string) float64 {
	var seed [8]byte
	binary.BigEndian.PutUint64(seed[:], uint64(s.cfg.Seed))
	sum := sha256.Sum256(append(append(seed[:], purpose...), id...))
	return float64(binary.BigEndian.Uint64(sum[:8])>>11) / (1 << 53)
}
