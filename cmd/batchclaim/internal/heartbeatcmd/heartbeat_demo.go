package heartbeatcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/cli"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/database"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/redact"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/subproc"
	"github.com/batchclaim/batchclaim/httpguard"
	"github.com/batchclaim/batchclaim/migrations"
	"github.com/batchclaim/batchclaim/patterns/election"
	"github.com/batchclaim/batchclaim/patterns/heartbeat"
	"github.com/batchclaim/batchclaim/pgdb"
)

// The demo's timeline, in seconds from the moment the sources start.
const (
	hbKillAt     = 10.0 // SIGKILL the active instance
	hbAddAt      = 12.5 // add the event type Heartbeat_vLB
	hbRemoveAt   = 18.0 // remove the event type Heartbeat_old (its source is raised)
	hbScheduleTo = 21.0 // every planned silence is over (except the ones that never end)
)

// Instance timings: election I and T, the step interval.
const (
	hbElectionInterval = 200 * time.Millisecond
	hbElectionTimeout  = 1500 * time.Millisecond
	hbStepInterval     = 100 * time.Millisecond
)

var never = math.Inf(1)

// hbDemoSource is a simulated monitored source: it beats every interval of its event type,
// except in its silences, from start on.
type hbDemoSource struct {
	name, event string
	interval    time.Duration
	missed      int
	start       float64
	silences    [][2]float64
	why         string

	mu       sync.Mutex
	beats    []heartbeat.Receipt // accepted heartbeats, in order
	rejected int                 // answered 422 (event type not configured)
}

func (s *hbDemoSource) silentAt(t float64) bool {
	if t < s.start {
		return true
	}
	for _, sp := range s.silences {
		if t >= sp[0] && t < sp[1] {
			return true
		}
	}
	return false
}

func hbDemoSources() []*hbDemoSource {
	vdns := func(name string, why string, sil ...[2]float64) *hbDemoSource {
		return &hbDemoSource{name: name, event: "Heartbeat_vDNS", interval: 200 * time.Millisecond, missed: 3, silences: sil, why: why}
	}
	vfw := func(name string, why string, sil ...[2]float64) *hbDemoSource {
		return &hbDemoSource{name: name, event: "Heartbeat_vFW", interval: 300 * time.Millisecond, missed: 2, silences: sil, why: why}
	}
	return []*hbDemoSource{
		vdns("vdns-1", "silent 3s-6s", [2]float64{3, 6}),
		vdns("vdns-2", "silent from 5s on, never resumes", [2]float64{5, never}),
		vdns("vdns-3", "silent 8s-13s: raised before the kill, cleared after it", [2]float64{8, 13}),
		vdns("vdns-4", "falls silent as the active instance is killed", [2]float64{hbKillAt + 0.05, 14}),
		vdns("vdns-5", "three silences", [2]float64{4, 5.5}, [2]float64{12, 13.5}, [2]float64{16, 17.5}),
		vfw("vfw-1", "a silence that begins and ends during the failover", [2]float64{hbKillAt + 0.1, hbKillAt + 1}),
		vdns("vdns-6", "one missed heartbeat, fewer than K: no event", [2]float64{2, 2.1}),
		vfw("vfw-3", "never silent"),
		vfw("vfw-4", "silent 15s-18s", [2]float64{15, 18}),
		{name: "old-1", event: "Heartbeat_old", interval: 200 * time.Millisecond, missed: 3, silences: [][2]float64{{15, never}},
			why: "silent from 15s; its event type is removed at 18s"},
		{name: "vlb-1", event: "Heartbeat_vLB", interval: 250 * time.Millisecond, missed: 2, start: hbAddAt + 0.5,
			silences: [][2]float64{{17, 18.5}}, why: "its event type is added at 12.5s; silent 17s-18.5s"},
	}
}

// hbSummary is what `heartbeat demo --json` prints. The first four counters (and the two
// after them) are invariants: all 0 in a correct run.
type hbSummary struct {
	LostRaises      int `json:"lost_raises"`       // a silence of K intervals with no raise stored
	DuplicateRaises int `json:"duplicate_raises"`  // more than one raise stored for one silence
	LostClears      int `json:"lost_clears"`       // a raise whose source beat again, never cleared
	RaisedByStandby int `json:"raised_by_standby"` // an event written by an instance that was not the active one then
	SpuriousRaises  int `json:"spurious_raises"`   // a raise for a pause shorter than K intervals
	Undelivered     int `json:"undelivered"`       // a stored event the webhook never received

	Silences            int      `json:"silences"` // pauses of K intervals or more, as the database stamped the heartbeats
	Raises              int      `json:"raises"`
	LateRaises          int      `json:"late_raises"` // silences that ended before any step saw them (raised after)
	Clears              int      `json:"clears"`
	ClearsOfRemovedType int      `json:"clears_of_removed_type"`
	Heartbeats          int      `json:"heartbeats"`
	HeartbeatsRejected  int      `json:"heartbeats_rejected"`
	PostsRetried        int      `json:"posts_retried_on_another_instance"`
	WebhookPosts        int      `json:"webhook_posts"`
	WebhookRefused      int      `json:"webhook_refused"`
	WebhookRepeats      int      `json:"webhook_repeats"`
	Terms               int      `json:"terms"`
	FailoverSeconds     float64  `json:"failover_seconds"`
	Instances           int      `json:"instances"`
	Sources             int      `json:"sources"`
	Faults              []string `json:"faults"`
	Problems            []string `json:"problems,omitempty"`
	DurationSeconds     float64  `json:"duration_seconds"`
	Database            string   `json:"database"`
}

func (s *hbSummary) violations() int {
	return s.LostRaises + s.DuplicateRaises + s.LostClears + s.RaisedByStandby + s.SpuriousRaises + s.Undelivered
}

func (s *hbSummary) problem(format string, a ...any) {
	if len(s.Problems) < 20 {
		s.Problems = append(s.Problems, fmt.Sprintf(format, a...))
	}
}

func (s *hbSummary) print(w io.Writer) {
	fmt.Fprintf(w, "\nsummary (%d instances, %d sources, database: %s)\n", s.Instances, s.Sources, s.Database)
	for _, f := range s.Faults {
		fmt.Fprintf(w, "  fault:              %s\n", f)
	}
	fmt.Fprintf(w, "  heartbeats:         %d accepted, %d rejected (type not configured), %d posts retried on another instance\n",
		s.Heartbeats, s.HeartbeatsRejected, s.PostsRetried)
	fmt.Fprintf(w, "  silences:           %d of K intervals or more; raises %d (%d late), clears %d (%d of a removed type)\n",
		s.Silences, s.Raises, s.LateRaises, s.Clears, s.ClearsOfRemovedType)
	fmt.Fprintf(w, "  webhook:            %d POSTs, %d refused and retried, %d repeats\n", s.WebhookPosts, s.WebhookRefused, s.WebhookRepeats)
	fmt.Fprintf(w, "  terms:              %d; new active instance %.1fs after the kill\n", s.Terms, s.FailoverSeconds)
	fmt.Fprintf(w, "  lost raises:        %d\n", s.LostRaises)
	fmt.Fprintf(w, "  duplicate raises:   %d\n", s.DuplicateRaises)
	fmt.Fprintf(w, "  lost clears:        %d\n", s.LostClears)
	fmt.Fprintf(w, "  raised by standby:  %d\n", s.RaisedByStandby)
	fmt.Fprintf(w, "  spurious raises:    %d\n", s.SpuriousRaises)
	fmt.Fprintf(w, "  undelivered:        %d\n", s.Undelivered)
	for _, p := range s.Problems {
		fmt.Fprintf(w, "  problem:            %s\n", p)
	}
	fmt.Fprintf(w, "  duration:           %.1fs\n", s.DurationSeconds)
}

// hbWebhook is the demo's control-loop receiver: it refuses every 7th POST (the active
// instance retries) and records what it accepted.
type hbWebhook struct {
	mu      sync.Mutex
	posts   int
	refused int
	got     map[string]int // event key -> times accepted
}

func (h *hbWebhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var e heartbeat.Event
	err := json.NewDecoder(r.Body).Decode(&e)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.posts++
	if err != nil || r.Header.Get("Idempotency-Key") != e.Key() {
		http.Error(w, "bad event", http.StatusBadRequest)
		return
	}
	if h.posts%7 == 0 {
		h.refused++
		http.Error(w, "busy", http.StatusServiceUnavailable)
		return
	}
	h.got[e.Key()]++
}

func (h *hbWebhook) received(key string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.got[key]
}

// hbDemo is one run of the demo.
type hbDemo struct {
	db      pgdb.DB
	url     string
	schema  string
	out     io.Writer
	logDir  string
	addrs   []string
	names   []string
	kids    map[string]*subproc.Child
	sources []*hbDemoSource
	hook    *hbWebhook
	client  *http.Client
	sum     hbSummary

	mu      sync.Mutex
	retried int
}

func heartbeatDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("heartbeat demo", "[flags]",
		"Active/standby with missed-heartbeat events, with faults, on a throwaway database: starts\n"+
			"instances of `batchclaim heartbeat run` as separate processes and a control-loop webhook\n"+
			"(which refuses every 7th POST), then simulated sources post VES heartbeats to any live\n"+
			"instance; some stop and resume, one never resumes, an event type is added and another\n"+
			"removed while they run, and the active instance is SIGKILLed at 10s. At the end every\n"+
			"source's accepted heartbeats (stamped by the database) are compared with the stored\n"+
			"events and the election's history. Exits non-zero if a raise was lost or repeated, a\n"+
			"clear lost, an event written by a standby, a pause shorter than K intervals raised or a\n"+
			"stored event never delivered. About 35 seconds.", stderr)
	instances := fs.Int("instances", 3, "heartbeat-service instances (at least 2)")
	asJSON := fs.Bool("json", false, "print the summary as one JSON object on stdout (the progress goes to stderr)")
	keep := fs.Bool("keep", false, "keep the scratch database (and cluster) afterwards")
	schema := database.SchemaFlag(fs)
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if *instances < 2 {
		return fmt.Errorf("--instances must be at least 2")
	}
	if err := pgdb.ValidateSchema(*schema); err != nil {
		return fmt.Errorf("--schema: %w", err)
	}
	out := stdout
	if *asJSON {
		out = stderr
	}
	started := time.Now()
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	db, err := database.NewScratch(ctx, "batchclaim_hb_demo", *keep, out, logger, migrations.InSchema(*schema))
	if err != nil {
		return err
	}
	defer db.Close(ctx)
	pool, err := database.Open(ctx, db.URL, 8)
	if err != nil {
		return err
	}
	defer pool.Close()
	pdb, err := pgdb.Open(pool, *schema)
	if err != nil {
		return err
	}
	d := &hbDemo{db: pdb, url: db.URL, schema: *schema, out: out, kids: map[string]*subproc.Child{}, sources: hbDemoSources(),
		hook:   &hbWebhook{got: map[string]int{}},
		client: &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 32}}}
	d.sum.Database, d.sum.Instances, d.sum.Sources = redact.URL(db.URL), *instances, len(d.sources)
	if err := d.run(ctx, *instances); err != nil {
		return err
	}
	d.sum.DurationSeconds = time.Since(started).Seconds()
	if err := cli.WriteSummary(stdout, *asJSON, d.sum, d.sum.print); err != nil {
		return err
	}
	if n := d.sum.violations(); n > 0 {
		return cli.ExitError{Code: 1, Msg: fmt.Sprintf("invariant violated: lost_raises=%d duplicate_raises=%d lost_clears=%d raised_by_standby=%d spurious_raises=%d undelivered=%d",
			d.sum.LostRaises, d.sum.DuplicateRaises, d.sum.LostClears, d.sum.RaisedByStandby, d.sum.SpuriousRaises, d.sum.Undelivered)}
	}
	return nil
}

func (d *hbDemo) run(ctx context.Context, instances int) error {
	types := []heartbeat.EventType{
		{Name: "Heartbeat_vDNS", Interval: 200 * time.Millisecond, MissedCount: 3, ControlLoop: heartbeat.ControlLoop{PolicyName: "vDNS", ClosedLoopControlName: "ControlLoop-vDNS"}},
		{Name: "Heartbeat_vFW", Interval: 300 * time.Millisecond, MissedCount: 2, ControlLoop: heartbeat.ControlLoop{PolicyName: "vFW", ClosedLoopControlName: "ControlLoop-vFW"}},
		{Name: "Heartbeat_old", Interval: 200 * time.Millisecond, MissedCount: 3},
	}
	if _, err := heartbeat.Reconfigure(ctx, d.db, types); err != nil {
		return err
	}
	hookSrv, hookAddr, err := httpguard.Start(httpguard.Config{Addr: "127.0.0.1:0", Handler: d.hook})
	if err != nil {
		return err
	}
	defer hookSrv.Close()
	if d.logDir, err = os.MkdirTemp("", "batchclaim-heartbeat-demo-"); err != nil {
		return err
	}
	fmt.Fprintf(d.out, "%d instances (election I=%s T=%s, a step every %s), %d sources, webhook http://%s; logs in %s\n",
		instances, hbElectionInterval, hbElectionTimeout, hbStepInterval, len(d.sources), hookAddr, d.logDir)
	defer func() {
		for _, k := range d.kids {
			k.Stop(5 * time.Second)
		}
	}()
	for i := 1; i <= instances; i++ {
		name := fmt.Sprintf("hb-%d", i)
		addr, err := subproc.FreeAddr()
		if err != nil {
			return err
		}
		k, err := subproc.Start(name, filepath.Join(d.logDir, name+".log"), "heartbeat", "run", "--database-url", d.url, "--schema", d.schema,
			"--name", name, "--listen", addr, "--election-interval", hbElectionInterval.String(), "--election-timeout", hbElectionTimeout.String(),
			"--step-interval", hbStepInterval.String(), "--delivery-interval", "200ms", "--webhook-url", "http://"+hookAddr,
			"--retry-base", "100ms", "--retry-max", "500ms", "--log-level", "info")
		if err != nil {
			return err
		}
		d.kids[name], d.addrs, d.names = k, append(d.addrs, addr), append(d.names, name)
	}
	if err := d.waitReady(ctx); err != nil {
		return err
	}
	d.warmUp(ctx)
	for _, s := range d.sources {
		fmt.Fprintf(d.out, "  source %-7s %-15s every %-6s K=%d  %s\n", s.name, s.event, s.interval, s.missed, s.why)
	}
	fmt.Fprintln(d.out)
	return d.timeline(ctx)
}

// waitReady waits until every instance answers /healthz and one is the active instance.
func (d *hbDemo) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		ready := 0
		for _, a := range d.addrs {
			if resp, err := d.client.Get("http://" + a + "/healthz"); err == nil {
				resp.Body.Close()
				ready++
			}
		}
		_, err := election.GetPrimary(ctx, d.db, heartbeat.RoleDefault)
		if ready == len(d.addrs) && err == nil {
			return nil
		}
		for name, k := range d.kids {
			if k.Exited() {
				return fmt.Errorf("%s exited at start (%v); see %s", name, k.Err, filepath.Join(d.logDir, name+".log"))
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("instances not ready within 30s; see the logs in %s", d.logDir)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// warmUp sends each instance a burst of heartbeats of an unconfigured type (answered 422
// after a database read), so that their connection pools are open before the sources'
// pauses are timed: a first heartbeat slowed by connection setup is a real pause.
func (d *hbDemo) warmUp(ctx context.Context) {
	body := []byte(`{"sourceName":"warm-up","eventName":"warm-up","lastEpochMicrosec":1}`)
	var wg sync.WaitGroup
	for _, a := range d.addrs {
		for range 2 * len(d.sources) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+a+"/heartbeat", bytes.NewReader(body))
				if resp, err := d.client.Do(req); err == nil {
					resp.Body.Close()
				}
			}()
		}
	}
	wg.Wait()
}

// timeline runs the sources and the faults, waits for the events to settle and checks.
func (d *hbDemo) timeline(ctx context.Context) error {
	t0 := time.Now()
	elapsed := func() float64 { return time.Since(t0).Seconds() }
	sctx, stopSources := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i, s := range d.sources {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.beat(sctx, s, i, t0)
		}()
	}
	defer func() { stopSources(); wg.Wait() }()

	var killed string
	var killedAt time.Time
	var removedAt time.Time // database time of the removal
	added, removed, failedOver := false, false, false
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	lastLine := -1
	for elapsed() < hbScheduleTo {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		t := elapsed()
		active, _ := election.GetPrimary(ctx, d.db, heartbeat.RoleDefault)
		switch {
		case killed == "" && t >= hbKillAt && active.Name != "":
			killed = active.Name
			k := d.kids[killed]
			if k == nil {
				return fmt.Errorf("the active instance %q is not one of the demo's", killed)
			}
			if err := k.Signal(syscall.SIGKILL); err != nil {
				return err
			}
			killedAt = time.Now()
			d.sum.Faults = append(d.sum.Faults, fmt.Sprintf("SIGKILL %s, the active instance (epoch %d), at %.1fs", killed, active.Epoch, t))
			fmt.Fprintf(d.out, ">>> %.1fs SIGKILL %s, the active instance\n", t, killed)
		case killed != "" && !failedOver && active.Name != "" && active.Name != killed:
			failedOver = true
			d.sum.FailoverSeconds = time.Since(killedAt).Seconds()
			fmt.Fprintf(d.out, ">>> %.1fs %s is the active instance (epoch %d), %.1fs after the kill\n", t, active.Name, active.Epoch, d.sum.FailoverSeconds)
		case !added && t >= hbAddAt:
			added = true
			if err := heartbeat.AddEventType(ctx, d.db, heartbeat.EventType{Name: "Heartbeat_vLB", Interval: 250 * time.Millisecond, MissedCount: 2}); err != nil {
				return err
			}
			d.sum.Faults = append(d.sum.Faults, fmt.Sprintf("event type Heartbeat_vLB added at %.1fs", t))
			fmt.Fprintf(d.out, ">>> %.1fs reconfiguration: event type Heartbeat_vLB added\n", t)
		case !removed && t >= hbRemoveAt:
			removed = true
			if err := heartbeat.RemoveEventType(ctx, d.db, "Heartbeat_old"); err != nil {
				return err
			}
			if err := d.db.QueryRow(ctx, "SELECT now()").Scan(&removedAt); err != nil {
				return err
			}
			d.sum.Faults = append(d.sum.Faults, fmt.Sprintf("event type Heartbeat_old removed at %.1fs", t))
			fmt.Fprintf(d.out, ">>> %.1fs reconfiguration: event type Heartbeat_old removed\n", t)
		}
		if sec := int(t); sec != lastLine {
			lastLine = sec
			d.progress(ctx, t, active)
		}
		for name, k := range d.kids {
			if name != killed && k.Exited() {
				return fmt.Errorf("%s exited unexpectedly (%v); see %s", name, k.Err, d.logDir)
			}
		}
	}
	fmt.Fprintf(d.out, ">>> %.1fs every planned silence is over; waiting for the last clears and deliveries\n", elapsed())
	end, err := d.settle(ctx)
	if err != nil {
		return err
	}
	stopSources()
	wg.Wait()
	return d.check(ctx, end, removedAt)
}

// beat runs one source until ctx ends.
func (d *hbDemo) beat(ctx context.Context, s *hbDemoSource, offset int, t0 time.Time) {
	tick := time.NewTicker(s.interval)
	defer tick.Stop()
	next := offset
	for seq := 1; ; seq++ {
		if !s.silentAt(time.Since(t0).Seconds()) {
			body, _ := json.Marshal(map[string]any{"event": map[string]any{
				"commonEventHeader": map[string]any{"domain": "heartbeat", "eventName": s.event, "sourceName": s.name,
					"reportingEntityName": s.name, "lastEpochMicrosec": time.Now().UnixMicro(), "sequence": seq,
					"priority": "Normal", "version": "4.0", "vesEventListenerVersion": "7.0"},
				"heartbeatFields": map[string]any{"heartbeatFieldsVersion": "3.0", "heartbeatInterval": s.interval.Seconds()},
			}})
			next = d.post(ctx, s, body, next)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// post sends one heartbeat to the instances in turn, starting at next, until one stores it
// or refuses it as unknown. It returns where the next heartbeat starts.
func (d *hbDemo) post(ctx context.Context, s *hbDemoSource, body []byte, next int) int {
	for try := range len(d.addrs) {
		i := (next + try) % len(d.addrs)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+d.addrs[i]+"/heartbeat", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := d.client.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return next
			}
			d.mu.Lock()
			d.retried++
			d.mu.Unlock()
			continue
		}
		var rec heartbeat.Receipt
		derr := json.NewDecoder(resp.Body).Decode(&rec)
		resp.Body.Close()
		s.mu.Lock()
		switch {
		case resp.StatusCode == http.StatusOK && derr == nil:
			s.beats = append(s.beats, rec)
		case resp.StatusCode == http.StatusUnprocessableEntity:
			s.rejected++
		}
		s.mu.Unlock()
		return i + 1
	}
	return next + 1
}

// progress prints one line: the active instance and the events so far.
func (d *hbDemo) progress(ctx context.Context, t float64, active election.Term) {
	es, err := heartbeat.ListEvents(ctx, d.db, 0, 10000)
	if err != nil {
		fmt.Fprintf(d.out, "t=%4.1fs  (%v)\n", t, err)
		return
	}
	raised, cleared, delivered := 0, 0, 0
	open := map[string]bool{}
	for _, e := range es {
		k := e.EventName + "/" + e.SourceName
		if e.Kind == heartbeat.Raised {
			raised++
			open[k] = true
		} else {
			cleared++
			delete(open, k)
		}
		if e.DeliveredAt != nil {
			delivered++
		}
	}
	var names []string
	for k := range open {
		names = append(names, k[strings.Index(k, "/")+1:])
	}
	sort.Strings(names)
	who := active.Name
	if who == "" {
		who = "(none)"
	}
	fmt.Fprintf(d.out, "t=%4.1fs  active: %-6s  raised %2d  cleared %2d  delivered %2d/%-2d  raised now: %s\n",
		t, who, raised, cleared, delivered, len(es), strings.Join(names, " "))
}

// settle waits until every raise of a source that beat again is cleared and the outbox is
// empty (or 20s pass), and returns the database time then.
func (d *hbDemo) settle(ctx context.Context) (time.Time, error) {
	deadline := time.Now().Add(20 * time.Second)
	for {
		var now time.Time
		if err := d.db.QueryRow(ctx, "SELECT now()").Scan(&now); err != nil {
			return now, err
		}
		pending, err := heartbeat.PendingDeliveries(ctx, d.db)
		if err != nil {
			return now, err
		}
		var open int
		if err := d.db.QueryRow(ctx, "SELECT count(*) FROM batchclaim.heartbeat_sources WHERE raised AND heartbeats > raised_heartbeat").Scan(&open); err != nil {
			return now, err
		}
		if (pending == 0 && open == 0) || time.Now().After(deadline) {
			// Let one more step interval and a margin pass, so that a source's last pause is
			// judged only as far as the active instance could have seen it.
			return now.Add(-3 * hbStepInterval), nil
		}
		select {
		case <-ctx.Done():
			return now, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
