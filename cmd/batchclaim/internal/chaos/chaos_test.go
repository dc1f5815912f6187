package chaos

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/dlt/dltsim"
	"github.com/batchclaim/batchclaim/testkit/history"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	ok := Config{Binary: "batchclaim"}.withDefaults()
	if err := ok.validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"too few instances", func(c *Config) { c.Instances = 2 }, "instances 2"},
		{"short run", func(c *Config) { c.Duration = time.Second }, "shorter than 10s"},
		{"no binary", func(c *Config) { c.Binary = "" }, "no batchclaim binary"},
		{"expiry-2 not after expiry-1", func(c *Config) { c.Expiry2 = c.Expiry1 }, "timings"},
		{"unknown kind", func(c *Config) { c.Kinds = []string{"meteor"} }, `unknown fault kind "meteor"`},
		{"unknown cluster", func(c *Config) { c.Cluster = "galera" }, `cluster "galera"`},
		{"patroni with a database URL", func(c *Config) { c.Cluster = ClusterPatroni; c.DatabaseURL = "postgres://x@y/z" }, "give no database URL"},
		{"patroni with an asynchronous standby", func(c *Config) { c.Cluster = ClusterPatroni; c.AsyncStandby = true }, "async-standby"},
		{"unknown operation", func(c *Config) { c.Ops = []string{"defrag"} }, `unknown operation "defrag"`},
		{"halt neither on nor off", func(c *Config) { c.HaltOnInvalid = "maybe" }, `halt-on-invalid "maybe"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := ok
			tc.edit(&c)
			if err := c.validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("validate = %v, want %q", err, tc.want)
			}
		})
	}
}

// The instances halt on INVALID at even seeds unless told; the replay names what differs
// from the defaults, operations included.
func TestHaltsAndReplay(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		seed  int64
		halt  string
		ops   []string
		want  bool
		flags string
	}{
		{1, "", nil, false, ""},
		{2, "", nil, true, ""},
		{1, HaltOn, nil, true, " --halt-on-invalid on"},
		{2, HaltOff, []string{}, false, " --ops none --halt-on-invalid off"},
		{3, "", []string{OpRetry, OpCancel}, false, " --ops retry,cancel"},
	} {
		c := Config{Seed: tc.seed, HaltOnInvalid: tc.halt, Ops: tc.ops, Binary: "b"}.withDefaults()
		if err := c.validate(); err != nil {
			t.Fatal(err)
		}
		if got := c.halts(); got != tc.want {
			t.Errorf("seed %d, halt-on-invalid %q: halts %t, want %t", tc.seed, tc.halt, got, tc.want)
		}
		if got := replayCommand(c); !strings.HasSuffix(got, "--batches 5"+tc.flags) {
			t.Errorf("replay %q, want it to end with %q", got, tc.flags)
		}
	}
}

// A gate passes connections until told to refuse new ones; those it carries go on.
func TestGate(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	g, err := startGate(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer g.close()
	echo := func(c net.Conn) error {
		if _, err := c.Write([]byte("x")); err != nil {
			return err
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err := io.ReadFull(c, make([]byte, 1))
		return err
	}
	old, err := net.Dial("tcp", g.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if err := echo(old); err != nil {
		t.Fatalf("before refusing: %v", err)
	}
	g.refuseNew(true)
	if err := echo(old); err != nil {
		t.Fatalf("an open connection while refusing: %v", err)
	}
	refused, err := net.Dial("tcp", g.addr())
	if err == nil {
		err = echo(refused)
		refused.Close()
	}
	if err == nil {
		t.Fatal("a new connection went through while refusing")
	}
	g.refuseNew(false)
	again, err := net.Dial("tcp", g.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if err := echo(again); err != nil {
		t.Fatalf("after refusing: %v", err)
	}
}

// Settlements are placed between the POSTs they happened between.
func TestLedgerEvents(t *testing.T) {
	t.Parallel()
	posts := []dltsim.Post{{BatchID: "a", Service: "s"}, {BatchID: "b", Service: "s"}}
	settled := []dltsim.Settlement{{BatchID: "a", Service: "s", AfterPosts: 1}, {BatchID: "b", Service: "s", AfterPosts: 2}}
	var got []string
	for _, e := range ledgerEvents(posts, settled) {
		kind := "post"
		if e.Settle {
			kind = "settle"
		}
		got = append(got, kind+" "+e.BatchID)
	}
	if strings.Join(got, ", ") != "post a, settle a, post b, settle b" {
		t.Fatalf("events = %v", got)
	}
}

// A victim's claims must be taken by their bound; claims it released itself, outages shorter
// than the bound and victims whose lease had already lapsed are not judged.
func TestJudgeTakeovers(t *testing.T) {
	t.Parallel()
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	victimID, other := uuid.New(), uuid.New()
	r := &run{cfg: Config{Renew: 200 * time.Millisecond, Allowance: time.Second}}
	// Lease: expiry-1 at 2s, expiry-2 at 8s. Bounds: idle 3.4s, busy 9.4s.
	r.victims = []*victim{{kind: KindSIGKILL, name: "i1-1", id: victimID, at: at(0), e1: at(2000), e2: at(8000),
		held: []heldClaim{{"fast", 1, false, true}, {"slow", 1, false, true}, {"busy", 1, true, true}, {"released", 1, false, true},
			{"never", 1, false, false}, {"dropped", 1, false, false}, {"cancelled", 1, false, true}}}}
	// Every key has a job unfinished throughout but "cancelled", whose only job an operator
	// cancelled 1s after the fault (it had work when the victim's claims were read).
	jobs := history.JobHistory{End: at(30000)}
	for i, svc := range []string{"fast", "slow", "busy", "released", "never", "dropped", "cancelled"} {
		j := history.Job{Seq: int64(i + 1), Service: svc, Stored: at(-1000), Final: batchclaim.StateNew}
		if svc == "cancelled" {
			j.Final, j.Changes = batchclaim.StateCancelled, []history.JobChange{{At: at(1000), From: batchclaim.StateNew, To: batchclaim.StateCancelled}}
		}
		jobs.Jobs = append(jobs.Jobs, j)
	}
	owned := func(svc string, end string, takenMS int) []history.Ownership {
		o := []history.Ownership{{Service: svc, Instance: victimID, Epoch: 1, From: at(-5000), To: at(takenMS), End: end}}
		if takenMS > 0 {
			o = append(o, history.Ownership{Service: svc, Instance: other, Epoch: 2, From: at(takenMS)})
		}
		return o
	}
	owns := map[string][]history.Ownership{
		"fast":      owned("fast", "voided_idle", 3000),
		"slow":      owned("slow", "voided_idle", 4000),
		"busy":      owned("busy", "voided_expired", 9000),
		"released":  owned("released", "released", 20000),
		"never":     {{Service: "never", Instance: victimID, Epoch: 1, From: at(-5000)}},
		"dropped":   owned("dropped", "dropped", 2500),
		"cancelled": {{Service: "cancelled", Instance: victimID, Epoch: 1, From: at(-5000)}},
	}
	slow, judged, problems := r.judgeTakeovers(owns, jobs)
	if slow != 3 || judged != 5 {
		t.Fatalf("slow %d judged %d, want 3 of 5: %v", slow, judged, problems)
	}
	// With idle rows dropped, a claim without unfinished work may be voided and its free row
	// dropped, never taken: only the claims with work until their bound are judged ("never"
	// had none, "cancelled" none from 1s).
	r.cfg.DropIdleAfter = time.Second
	slow, judged, problems = r.judgeTakeovers(owns, jobs)
	if slow != 1 || judged != 3 {
		t.Fatalf("dropping idle rows: slow %d judged %d, want 1 of 3: %v", slow, judged, problems)
	}
	// drop_idle_on turned it on before the claims' bounds: judged as with the flag.
	r.cfg.DropIdleAfter = 0
	r.dropIdleFrom = at(1000)
	if slow, judged, problems = r.judgeTakeovers(owns, jobs); slow != 1 || judged != 3 {
		t.Fatalf("drop_idle_on: slow %d judged %d, want 1 of 3: %v", slow, judged, problems)
	}
	r.dropIdleFrom = time.Time{}
	r.victims[0].until = at(3000) // back before any bound
	if slow, judged, _ := r.judgeTakeovers(owns, jobs); slow != 0 || judged != 0 {
		t.Fatalf("short outage: slow %d judged %d, want none judged", slow, judged)
	}
}

// dumpStacks saves the goroutines of each running instance from its profiles, and says where
// (or why not) for each.
func TestDumpStacks(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/debug/pprof/goroutine" || r.URL.Query().Get("debug") != "2" {
			http.NotFound(w, r)
			return
		}
		_, _ = io.WriteString(w, "goroutine 1 [running]:\n")
	}))
	defer srv.Close()
	var progress strings.Builder
	alive := make(chan struct{}) // never closed: the process has not exited
	r := &run{logDir: t.TempDir(), cfg: Config{Progress: &progress}, instances: []*instance{
		{name: "i1-1", state: stateRunning, done: alive, listen: strings.TrimPrefix(srv.URL, "http://")},
		{name: "i2-1", state: stateKilled, listen: strings.TrimPrefix(srv.URL, "http://")},
		{name: "i3-1", state: stateRunning, done: alive, listen: "127.0.0.1:1"},
	}}
	r.dumpStacks(t.Context(), "not quiescent")
	got, err := os.ReadFile(filepath.Join(r.logDir, "i1-1.goroutines.txt"))
	if err != nil || string(got) != "goroutine 1 [running]:\n" {
		t.Fatalf("i1-1's dump: %q, %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(r.logDir, "i2-1.goroutines.txt")); !os.IsNotExist(err) {
		t.Errorf("a killed instance's dump was written (%v)", err)
	}
	out := progress.String()
	if !strings.Contains(out, "not quiescent: i1-1's goroutines in ") || !strings.Contains(out, "not quiescent: i3-1's goroutines not read: ") {
		t.Errorf("progress says:\n%s", out)
	}
}

// A process the harness stops is not taken by the watcher for one that exited by itself, from
// the signal until the slot's next start (a restart): that would start a second process in
// the slot. A process that ends on its own still is.
func TestStoppedIsNotExitedByItself(t *testing.T) {
	t.Parallel()
	spawn := func(in *instance, args ...string) {
		cmd := exec.Command(args[0], args[1:]...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		in.proc, in.done, in.state = cmd, done, stateRunning
	}
	var progress strings.Builder
	r := &run{cfg: Config{Progress: &progress}}
	stopped := &instance{name: "i1-1"}
	spawn(stopped, "sleep", "60")
	r.instances = []*instance{stopped}
	stopped.stop(10 * time.Second)
	if _, state, _ := stopped.snapshot(); state != stateStopping {
		t.Fatalf("a stopped process's slot is %q, want %q until its next start", state, stateStopping)
	}
	r.checkExited()
	if len(r.problems) != 0 {
		t.Fatalf("problems: %q", r.problems)
	}
	ended := &instance{name: "i2-1"}
	spawn(ended, "true")
	<-ended.done
	if _, state, _ := ended.snapshot(); state != stateExited {
		t.Fatalf("a process that ended on its own: %q, want %q", state, stateExited)
	}
}
