package ui_test

import (
	"context"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/observer"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/ui"
)

var update = flag.Bool("update", false, "rewrite the golden screenshots in testdata/screenshots")

// The screenshot expectations: each view of the page rendered in headless Chromium from
// fixed data must look like its golden PNG in testdata/screenshots. The page and its assets
// are the shipped ones (ui.New + Register); only the /api/... answers are fixtures built from
// the package's own types, the browser's clock is pinned (a same-origin script that fixes
// Date.now and new Date(), time zone UTC, locale en-US), and so are its fonts (the files in
// testdata/fonts, whatever fonts the machine has: fonts_test.go), so nothing in the pixels
// depends on the time, on ids, on a database or on the machine's fonts.
//
// A view fails when more than maxDiffFraction of its pixels differ by more than
// channelTolerance in any channel (compare_test.go; TestScreenshotsCatchChanges shows that a
// changed digit or colour fails); the new image and a diff image (differing pixels red) are
// written to $ARTIFACTS_DIR/screenshots (else a new directory under the system's temp dir)
// and their paths logged. What is left to the machine is the Chromium build:
// testdata/screenshots/BROWSER names the one that made the goldens. After an intended change
// of the page, or when a newer Chromium draws text or edges differently enough to fail (the
// diff image shows outlines of glyphs and shapes, not a changed value or colour), rewrite the
// goldens with that browser:
//
//	go test ./ui -run TestScreenshots -update
//
// then look at the new PNGs and commit them with BROWSER. Without a Chromium binary the test
// skips, unless REQUIRE_BROWSER=1.
func TestScreenshots(t *testing.T) {
	browser := newScreenshotBrowser(t)
	t.Parallel()
	srv := fixtureServer(t, fixtureChange{})
	// Screenshots go to $ARTIFACTS_DIR/screenshots, else to a directory removed after the
	// test; a failing view's images are then copied to one that stays (keep).
	out, artifacts := t.TempDir(), ""
	if dir := os.Getenv("ARTIFACTS_DIR"); dir != "" {
		out, artifacts = filepath.Join(dir, "screenshots"), filepath.Join(dir, "screenshots")
		if err := os.MkdirAll(out, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	keep := sync.OnceValues(func() (string, error) {
		if artifacts != "" {
			return artifacts, nil
		}
		return os.MkdirTemp("", "batchclaim-screenshots-")
	})
	if *update {
		if err := os.MkdirAll(goldenDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(goldenDir, "BROWSER"), []byte(browser.version+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	madeWith, _ := os.ReadFile(filepath.Join(goldenDir, "BROWSER"))

	for _, v := range screenshotViews {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			shot := filepath.Join(out, v.name+".png")
			dom := browser.render(t, srv, v, shot)
			for _, want := range v.texts {
				if !strings.Contains(dom, want) {
					t.Errorf("the %s view lacks %q:\n%s", v.name, want, mainOf(dom))
				}
			}
			golden := filepath.Join(goldenDir, v.name+".png")
			if *update {
				b, err := os.ReadFile(shot)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, b, 0o644); err != nil {
					t.Fatal(err)
				}
				t.Logf("wrote %s (%d bytes)", golden, len(b))
				return
			}
			want, err := readPNG(golden)
			if err != nil {
				t.Fatalf("golden %v; create it with: go test ./ui -run TestScreenshots -update", err)
			}
			got, err := readPNG(shot)
			if err != nil {
				t.Fatal(err)
			}
			diff, n, shaded, total := comparePNG(want, got)
			if withinTolerance(n, total) {
				if shaded > 0 {
					t.Logf("%d of %d pixels differ, %d of them by more than %d (allowed: %.3f%%)", shaded, total, n, channelTolerance, 100*maxDiffFraction)
				}
				return
			}
			dir, err := keep()
			if err != nil {
				t.Fatal(err)
			}
			newPath, diffPath := filepath.Join(dir, v.name+".png"), filepath.Join(dir, v.name+".diff.png")
			if err := writePNG(diffPath, diff); err != nil {
				t.Error(err)
			}
			if newPath != shot {
				if err := writePNG(newPath, got); err != nil {
					t.Error(err)
				}
			}
			made := strings.TrimSpace(string(madeWith))
			advice := "If the change of the page is intended, rewrite the goldens: go test ./ui -run TestScreenshots -update"
			if made != browser.version {
				advice = fmt.Sprintf("The goldens were made with %s, this run used %s. If the diff image shows only outlines of\n"+
					"  glyphs and shapes drawn a little differently (not a changed value, word or colour), the browser is the\n"+
					"  change: rewrite the goldens with it (go test ./ui -run TestScreenshots -update), look at them and commit\n"+
					"  them with testdata/screenshots/BROWSER. Else the page changed: fix it, or rewrite them as well if intended.", made, browser.version)
			}
			t.Errorf("%s: %d of %d pixels (%.3f%%) differ from %s, more than %.3f%%\n  new image:  %s\n  diff image: %s (red: differing pixels)\n  %s",
				v.name, n, total, 100*float64(n)/float64(total), golden, 100*maxDiffFraction, newPath, diffPath, advice)
		})
	}
}

// TestScreenshotsCatchChanges renders the overview with one small change each (a digit of a
// number; a state's colour 24 shades off in one channel, a step a person might not notice)
// and checks that the comparison with the overview's golden fails: the tolerance that lets a
// browser's patch release through lets neither through.
func TestScreenshotsCatchChanges(t *testing.T) {
	browser := newScreenshotBrowser(t)
	if *update {
		t.Skip("-update is rewriting the goldens this checks against; run the tests again without it")
	}
	t.Parallel()
	golden := filepath.Join(goldenDir, "overview.png")
	want, err := readPNG(golden)
	if err != nil {
		t.Fatalf("golden %v; create it with: go test ./ui -run TestScreenshots -update", err)
	}
	overview := screenshotViews[0]
	for _, c := range []struct {
		name   string
		change fixtureChange
		shows  string // in the DOM when the change took effect
	}{
		{"a digit of the halted batch's seq", fixtureChange{status: func(s *ui.Status) { s.Halted[0].Seq = 1048 }}, ">#1048<"},
		{"the committed colour 24 shades redder", fixtureChange{css: ":root { --s-committed: #379d55; }"}, `class="chip s-COMMITTED"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			shot := filepath.Join(t.TempDir(), "overview.png")
			dom := browser.render(t, fixtureServer(t, c.change), overview, shot)
			if !strings.Contains(dom, c.shows) {
				t.Fatalf("the changed overview lacks %q:\n%s", c.shows, mainOf(dom))
			}
			got, err := readPNG(shot)
			if err != nil {
				t.Fatal(err)
			}
			_, n, _, total := comparePNG(want, got)
			if withinTolerance(n, total) {
				t.Fatalf("%d of %d pixels differ from %s, within the tolerance (%.3f%% beyond %d shades): the change would pass unseen", n, total, golden, 100*maxDiffFraction, channelTolerance)
			}
			t.Logf("%d pixels differ by more than %d shades, %.0f times the %.0f allowed", n, channelTolerance, float64(n)/(maxDiffFraction*float64(total)), maxDiffFraction*float64(total))
		})
	}
}

// goldenDir holds the golden PNGs and BROWSER, relative to the package directory.
var goldenDir = filepath.Join("testdata", "screenshots")

type screenshotView struct {
	name     string   // the golden's name
	fragment string   // the page's URL fragment ("" for the overview)
	height   int      // of the window (1280 wide, 900 at least): the whole view, none of it below the fold
	view     string   // body's data-view once drawn
	texts    []string // in the DOM once drawn
}

var screenshotViews = []screenshotView{
	{"overview", "", 1200, "overview", []string{`id="t-instances">2 / 3<`, `id="updated" class="muted">database time 14:30:00<`, `<tr data-service="svc-halted">`}},
	{"service", "#/service/svc-halted", 900, "service", []string{`id="service-resume"`, "batch INVALID: signature check failed", `id="queue-next"`}},
	{"batch-invalid", "#/batch/1042", 1150, "batch", []string{`id="invalid-details"`, `id="batch-retry"`, `"message": "signature check failed"`}},
	{"batch-delayed", "#/batch/1057", 900, "batch", []string{`id="batch-retry">Retry now<`, `id="batch-cancel"`, "503 Service Unavailable"}},
	{"batch-discarded", "#/batch/1061", 900, "batch", []string{`id="batch-retry">Retry<`, "DISCARDED"}},
	{"batch-cancelled", "#/batch/1063", 900, "batch", []string{`id="batch-retry">Retry<`, "cancelled from the status page"}},
	{"batches", "#/batches?window=24h", 900, "batches", []string{`id="list-next"`, "DISCARDED", "CANCELLED", "(this page read the batches from #901 on)"}},
}

// fixedNow is the database time of the fixtures and the browser's pinned clock.
var fixedNow = time.Date(2025, 6, 2, 14, 30, 0, 0, time.UTC)

// clockScript pins the page's clock: Date.now() and new Date() are fixedNow; a Date of a
// given time is unchanged. It is served from the page's origin, so the page's
// Content-Security-Policy (its own scripts only) holds as shipped.
var clockScript = `"use strict";
(function () {
  const fixed = ` + strconv.FormatInt(fixedNow.UnixMilli(), 10) + `;
  const Real = Date;
  class Fixed extends Real {
    constructor(...args) { if (args.length === 0) super(fixed); else super(...args); }
    static now() { return fixed; }
  }
  window.Date = Fixed;
})();
`

// fixtureChange is a change of what fixtureServer serves, for TestScreenshotsCatchChanges.
type fixtureChange struct {
	css    string           // a stylesheet added after the page's own and the pinned fonts'
	status func(*ui.Status) // applied to the overview's fixture
}

// fixtureServer serves the shipped page and assets from the package's handler, the page with
// the clock script and the fonts' script added first in <head> and the pinned fonts'
// stylesheet after the page's own, the test's fonts under /test/, and fixtures for every
// GET /api/... the views make.
func fixtureServer(t *testing.T, change fixtureChange) *httptest.Server {
	t.Helper()
	h, err := ui.New(dbtest.Unreachable(t), ui.Config{}) // only the page and its assets: a query would fail
	if err != nil {
		t.Fatal(err)
	}
	shipped := http.NewServeMux()
	h.Register(shipped)

	rec := httptest.NewRecorder()
	shipped.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	const head, style = "<head>\n", `<link rel="stylesheet" href="/assets/style.css">` + "\n"
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), head) || !strings.Contains(rec.Body.String(), style) {
		t.Fatalf("the shipped page: %d\n%s", rec.Code, rec.Body)
	}
	page := strings.Replace(rec.Body.String(), head, head+"<script src=\"/test/clock.js\"></script>\n<script src=\"/test/fonts.js\"></script>\n", 1)
	added := `<link rel="stylesheet" href="/test/fonts.css">` + "\n"
	if change.css != "" {
		added += `<link rel="stylesheet" href="/test/change.css">` + "\n"
	}
	page = strings.Replace(page, style, style+added, 1)
	pageHeader := rec.Header().Clone()

	status, pages, batches, list := fixtures()
	if change.status != nil {
		change.status(&status)
	}
	test := http.NewServeMux()
	test.HandleFunc("GET /test/clock.js", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		_, _ = w.Write([]byte(clockScript))
	})
	test.HandleFunc("GET /test/change.css", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
		_, _ = w.Write([]byte(change.css))
	})
	servePinnedFonts(test)

	api := http.NewServeMux()
	api.HandleFunc("GET /api/status", func(w http.ResponseWriter, r *http.Request) { writeFixture(w, status) })
	api.HandleFunc("GET /api/services/{service_id}", func(w http.ResponseWriter, r *http.Request) {
		p, ok := pages[r.PathValue("service_id")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		writeFixture(w, p)
	})
	api.HandleFunc("GET /api/batches/{seq}", func(w http.ResponseWriter, r *http.Request) {
		seq, _ := strconv.ParseInt(r.PathValue("seq"), 10, 64)
		b, ok := batches[seq]
		if !ok {
			http.NotFound(w, r)
			return
		}
		writeFixture(w, b)
	})
	api.HandleFunc("GET /api/batches", func(w http.ResponseWriter, r *http.Request) { writeFixture(w, list) })
	api.HandleFunc("GET /api/search", func(w http.ResponseWriter, r *http.Request) {
		writeFixture(w, ui.SearchResult{Query: r.URL.Query().Get("q"), Batches: []ui.BatchRef{}, ServiceIDs: []string{}})
	})

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/":
			for k, v := range pageHeader {
				w.Header()[k] = v
			}
			_, _ = w.Write([]byte(page))
		case strings.HasPrefix(r.URL.Path, "/test/"):
			test.ServeHTTP(w, r)
		case strings.HasPrefix(r.URL.Path, "/api/"):
			api.ServeHTTP(w, r)
		default:
			shipped.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func writeFixture(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(v)
}

// ago is a fixture time before fixedNow.
func ago(d time.Duration) time.Time { return fixedNow.Add(-d) }

func agoPtr(d time.Duration) *time.Time { t := ago(d); return &t }

func ptr[T any](v T) *T { return &v }

// fixtureID is a batch id as the ledger makes them: 128 hex digits, fixed by name.
func fixtureID(name string) string {
	s := sha512.Sum512([]byte(name))
	return hex.EncodeToString(s[:])
}

// fixtures returns the overview, the service_id pages, the batches by seq and the batch list
// the views show.
func fixtures() (ui.Status, map[string]ui.ServicePage, map[int64]ui.BatchDetail, ui.BatchList) {
	instance := func(n int) uuid.UUID { return uuid.MustParse(fmt.Sprintf("00000000-0000-4000-8000-%012d", n)) }
	halt := observer.Halt{ServiceID: "svc-halted", Seq: 1042, Reason: "batch INVALID: signature check failed", At: ago(7*time.Minute + 12*time.Second)}

	// The chart: 30 buckets of 20 s; every state has some, so every colour shows.
	counts := map[string][]int64{}
	totals := map[string]int64{}
	for k, s := range []string{"NEW", "INFLIGHT", "PENDING", "DELAYED", "UNKNOWN", "VALID", "COMMITTED", "INVALID", "DISCARDED", "CANCELLED"} {
		c := make([]int64, 30)
		for i := range c {
			switch s {
			case "NEW", "INFLIGHT", "PENDING", "COMMITTED":
				c[i] = int64(2 + (i*7+k*3)%9)
			default:
				if (i+k)%6 == 0 {
					c[i] = int64(1 + (i+k)%3)
				}
			}
			totals[s] += c[i]
		}
		counts[s] = c
	}
	transition := func(d time.Duration, seq int64, svc, from, to, inst string, epoch int64, detail string) ui.Transition {
		return ui.Transition{At: ago(d), Seq: seq, ServiceID: svc, BatchID: fixtureID(strconv.FormatInt(seq, 10)), From: from, To: to,
			Epoch: ptr(epoch), Instance: inst, Detail: detail}
	}
	status := ui.Status{
		At: fixedNow,
		Instances: []claims.InstanceStatus{
			{ID: instance(1), Name: "node-a", Host: "worker-1", Version: "v1.4.0", StartedAt: ago(3*time.Hour + 12*time.Minute),
				HeartbeatAt: ago(400 * time.Millisecond), HeartbeatAgeSeconds: 0.4, Expiry1: fixedNow.Add(3 * time.Second),
				Expiry2: fixedNow.Add(12 * time.Second), Phase: "live", Claims: 5},
			{ID: instance(2), Name: "node-b", Host: "worker-2", Version: "v1.4.0", StartedAt: ago(26 * time.Minute),
				HeartbeatAt: ago(1200 * time.Millisecond), HeartbeatAgeSeconds: 1.2, Expiry1: fixedNow.Add(2 * time.Second),
				Expiry2: fixedNow.Add(11 * time.Second), Phase: "live", Claims: 3},
			{ID: instance(3), Name: "node-gone", Host: "worker-3", Version: "v1.3.2", StartedAt: ago(2 * 24 * time.Hour),
				HeartbeatAt: ago(95 * time.Second), HeartbeatAgeSeconds: 95, Expiry1: ago(92 * time.Second),
				Expiry2: ago(83 * time.Second), Phase: "expired", Claims: 0},
		},
		ServiceIDs: 9, Unclaimed: 1, FairShare: 5,
		Open: ui.Open{
			ByState: map[string]int64{"NEW": 5, "INFLIGHT": 1, "PENDING": 2, "DELAYED": 1}, Total: 9, OldestSeconds: 312.5, ServiceCount: 4,
			Services: []ui.Service{
				{ServiceID: "svc-halted", ByState: map[string]int64{"NEW": 3}, OldestSeconds: 312.5, Owner: "node-a"},
				{ServiceID: "svc-billing", ByState: map[string]int64{"DELAYED": 1, "NEW": 1}, OldestSeconds: 95.25, Owner: "node-b"},
				{ServiceID: "svc-orders", ByState: map[string]int64{"INFLIGHT": 1, "PENDING": 2}, OldestSeconds: 4.75, Owner: "node-a"},
				{ServiceID: "svc-unowned", ByState: map[string]int64{"NEW": 1}, OldestSeconds: 0.5},
			},
		},
		Halted: []observer.Halt{halt},
		Chart:  ui.Chart{WindowSeconds: 600, BucketSeconds: 20, Counts: counts, Totals: totals},
		Transitions: []ui.Transition{
			transition(1*time.Second, 1070, "svc-orders", "INFLIGHT", "PENDING", "node-a", 4, ""),
			transition(2*time.Second, 1070, "svc-orders", "NEW", "INFLIGHT", "node-a", 4, ""),
			transition(9*time.Second, 1068, "svc-payments", "PENDING", "COMMITTED", "node-b", 2, ""),
			transition(31*time.Second, 1063, "svc-billing", "NEW", "CANCELLED", "", 0, ""),
			transition(48*time.Second, 1061, "svc-billing", "DELAYED", "DISCARDED", "node-b", 3, ""),
			transition(95*time.Second, 1057, "svc-billing", "INFLIGHT", "DELAYED", "node-b", 3, ""),
			transition(7*time.Minute+12*time.Second, 1042, "svc-halted", "PENDING", "INVALID", "node-a", 7, ""),
			transition(8*time.Minute, 1040, "svc-<b>odd</b>&\"x%", "", "NEW", "", 0, ""),
		},
		Takeovers: []ui.Takeover{
			{ID: 2, At: ago(90 * time.Second), ServiceID: "svc-halted", Epoch: 6, Event: "voided_expired", From: "node-gone", To: "node-a", AcquiredAfterSeconds: 0.35},
			{ID: 1, At: ago(92 * time.Second), ServiceID: "svc-unowned", Epoch: 2, Event: "voided_idle", From: "node-gone", AcquiredAfterSeconds: -1},
		},
	}

	ref := func(seq int64, svc, state string, attempts int32, created, updated time.Duration) ui.BatchRef {
		return ui.BatchRef{Seq: seq, ServiceID: svc, BatchID: fixtureID(strconv.FormatInt(seq, 10)), State: state, Attempts: attempts,
			CreatedAt: ago(created), UpdatedAt: ago(updated)}
	}
	pages := map[string]ui.ServicePage{
		"svc-halted": {
			ServiceID: "svc-halted", Owner: "node-a", Epoch: 7, Phase: "held", ClaimedAt: agoPtr(90 * time.Second), Unfinished: 53,
			Halt: &halt,
			Queue: []ui.BatchRef{
				ref(1044, "svc-halted", "NEW", 0, 312*time.Second, 312*time.Second),
				ref(1049, "svc-halted", "NEW", 0, 250*time.Second, 250*time.Second),
				ref(1053, "svc-halted", "NEW", 0, 120*time.Second, 120*time.Second),
			},
			NextAfter: 1053,
			Ownership: []ui.OwnershipEvent{
				{At: ago(90 * time.Second), Event: "acquired", Epoch: 7, Instance: "node-a"},
				{At: ago(90*time.Second + 350*time.Millisecond), Event: "voided_expired", Epoch: 6, Instance: "node-gone"},
				{At: ago(3 * time.Hour), Event: "acquired", Epoch: 6, Instance: "node-gone"},
				{At: ago(3*time.Hour + time.Second), Event: "surplus_released", Epoch: 5, Instance: "node-b"},
				{At: ago(26 * time.Hour), Event: "acquired", Epoch: 5, Instance: "3f2a9c1e"},
			},
		},
	}

	status202, status503, status400 := int32(202), int32(503), int32(400)
	post := func(n int64, started time.Duration, reason string, http *int32, ms float64, outcome, errText, inst string, epoch int64) ui.Attempt {
		a := ui.Attempt{Number: n, StartedAt: ago(started), Reason: reason, HTTPStatus: http, Outcome: outcome, Error: errText, Instance: inst, Epoch: epoch}
		if ms > 0 {
			a.FinishedAt = ptr(a.StartedAt.Add(time.Duration(ms * float64(time.Millisecond))))
			a.LatencyMs = ptr(ms)
		}
		return a
	}
	kinded := func(r ui.BatchRef, kind string) ui.BatchRef { r.Kind = kind; return r }
	detail := func(ref ui.BatchRef) ui.BatchDetail {
		return ui.BatchDetail{BatchRef: ref, Ledger: true, PayloadBytes: 18_432, SubmittedAt: ptr(ref.CreatedAt.Add(200 * time.Millisecond)), Owner: "node-b", Epoch: ptr(int64(3))}
	}
	invalid := detail(ref(1042, "svc-halted", "INVALID", 2, 9*time.Minute, 7*time.Minute+12*time.Second))
	invalid.Owner, invalid.Epoch = "node-a", ptr(int64(7))
	invalid.SubmittedAt = agoPtr(8*time.Minute + 40*time.Second)
	invalid.FinishedAt = agoPtr(7*time.Minute + 12*time.Second)
	invalid.DLTStatus = "INVALID"
	invalid.LastError = "ledger: batch INVALID: signature check failed"
	invalid.InvalidDetails = json.RawMessage(`{"status":"INVALID","invalid_transactions":[{"id":"7d41c9a0e2","message":"signature check failed","extended_data":{"signer":"03a1b2c3d4","expected":"03ffee0011"}}]}`)
	invalid.Posts = []ui.Attempt{
		post(2, 8*time.Minute+40*time.Second, "retry", &status202, 41.7, "accepted", "", "node-a", 7),
		post(1, 9*time.Minute, "first", &status503, 1203.4, "retry", "503 Service Unavailable: ledger busy", "node-gone", 6),
	}
	invalid.Transitions = []ui.Transition{
		transition(9*time.Minute, 1042, "svc-halted", "NEW", "INFLIGHT", "node-gone", 6, ""),
		transition(9*time.Minute-1200*time.Millisecond, 1042, "svc-halted", "INFLIGHT", "DELAYED", "node-gone", 6, "503 Service Unavailable: ledger busy"),
		transition(8*time.Minute+40*time.Second, 1042, "svc-halted", "DELAYED", "INFLIGHT", "node-a", 7, ""),
		transition(8*time.Minute+39*time.Second, 1042, "svc-halted", "INFLIGHT", "PENDING", "node-a", 7, ""),
		transition(7*time.Minute+12*time.Second, 1042, "svc-halted", "PENDING", "INVALID", "node-a", 7, "ledger status INVALID"),
	}

	delayed := detail(kinded(ref(1057, "svc-billing", "DELAYED", 3, 6*time.Minute, 95*time.Second), "invoice.send"))
	delayed.TimeoutMs = ptr(int64(30_000))
	delayed.NextAttemptAt = ptr(fixedNow.Add(65 * time.Second))
	delayed.LastError = "503 Service Unavailable: ledger busy"
	delayed.Posts = []ui.Attempt{
		post(3, 95*time.Second, "retry", &status503, 2004.9, "retry", "503 Service Unavailable: ledger busy", "node-b", 3),
		post(2, 3*time.Minute, "retry", nil, 5000, "retry", "dial tcp 10.0.4.17:8008: i/o timeout", "node-b", 3),
		post(1, 6*time.Minute, "first", &status503, 987.25, "retry", "503 Service Unavailable: ledger busy", "node-b", 3),
	}
	delayed.Transitions = []ui.Transition{
		transition(6*time.Minute, 1057, "svc-billing", "NEW", "INFLIGHT", "node-b", 3, ""),
		transition(6*time.Minute-time.Second, 1057, "svc-billing", "INFLIGHT", "DELAYED", "node-b", 3, "503 Service Unavailable: ledger busy"),
		transition(3*time.Minute, 1057, "svc-billing", "DELAYED", "INFLIGHT", "node-b", 3, ""),
		transition(3*time.Minute-5*time.Second, 1057, "svc-billing", "INFLIGHT", "DELAYED", "node-b", 3, "dial tcp 10.0.4.17:8008: i/o timeout"),
		transition(95*time.Second+2*time.Second, 1057, "svc-billing", "DELAYED", "INFLIGHT", "node-b", 3, ""),
		transition(95*time.Second, 1057, "svc-billing", "INFLIGHT", "DELAYED", "node-b", 3, "503 Service Unavailable: ledger busy"),
	}

	discarded := detail(kinded(ref(1061, "svc-billing", "DISCARDED", 5, 40*time.Minute, 48*time.Second), "invoice.send"))
	discarded.Output = json.RawMessage(`{"sent":0,"rejected_by":"ledger","lines":42}`)
	discarded.FinishedAt = agoPtr(48 * time.Second)
	discarded.LastError = "attempts exhausted (5 of 5): 400 Bad Request: malformed batch list"
	discarded.Posts = []ui.Attempt{
		post(5, 49*time.Second, "retry", &status400, 12.5, "failed", "400 Bad Request: malformed batch list", "node-b", 3),
		post(4, 5*time.Minute, "retry", &status400, 11.0, "retry", "400 Bad Request: malformed batch list", "node-b", 3),
		post(3, 12*time.Minute, "retry", &status400, 13.75, "retry", "400 Bad Request: malformed batch list", "node-b", 3),
		post(2, 25*time.Minute, "retry", &status400, 10.5, "retry", "400 Bad Request: malformed batch list", "node-b", 3),
		post(1, 40*time.Minute, "first", &status400, 14.0, "retry", "400 Bad Request: malformed batch list", "node-b", 3),
	}
	discarded.Transitions = []ui.Transition{
		transition(40*time.Minute, 1061, "svc-billing", "NEW", "INFLIGHT", "node-b", 3, ""),
		transition(40*time.Minute-time.Second, 1061, "svc-billing", "INFLIGHT", "DELAYED", "node-b", 3, "400 Bad Request: malformed batch list"),
		transition(49*time.Second, 1061, "svc-billing", "DELAYED", "INFLIGHT", "node-b", 3, ""),
		transition(48*time.Second, 1061, "svc-billing", "INFLIGHT", "DISCARDED", "node-b", 3, "attempts exhausted (5 of 5)"),
	}

	cancelled := ui.BatchDetail{BatchRef: ref(1063, "svc-billing", "CANCELLED", 0, 50*time.Second, 31*time.Second), Ledger: true, PayloadBytes: 2_048,
		FinishedAt: agoPtr(31 * time.Second), Posts: []ui.Attempt{}}
	cancelled.Transitions = []ui.Transition{
		{At: ago(31 * time.Second), Seq: 1063, ServiceID: "svc-billing", BatchID: cancelled.BatchID, From: "NEW", To: "CANCELLED", Detail: "cancelled from the status page"},
	}

	batches := map[int64]ui.BatchDetail{1042: invalid, 1057: delayed, 1061: discarded, 1063: cancelled}

	list := ui.BatchList{WindowSeconds: 86400, NextBefore: 1001, ScannedTo: 901, Batches: []ui.BatchRef{
		ref(1070, "svc-orders", "PENDING", 1, 3*time.Second, 1*time.Second),
		ref(1068, "svc-payments", "COMMITTED", 1, 14*time.Second, 9*time.Second),
		ref(1063, "svc-billing", "CANCELLED", 0, 50*time.Second, 31*time.Second),
		kinded(ref(1061, "svc-billing", "DISCARDED", 5, 40*time.Minute, 48*time.Second), "invoice.send"),
		kinded(ref(1057, "svc-billing", "DELAYED", 3, 6*time.Minute, 95*time.Second), "invoice.send"),
		ref(1053, "svc-halted", "NEW", 0, 120*time.Second, 120*time.Second),
		ref(1042, "svc-halted", "INVALID", 2, 9*time.Minute, 7*time.Minute+12*time.Second),
		ref(1031, "svc-payments", "VALID", 1, 40*time.Minute, 39*time.Minute),
		ref(1017, "svc-orders", "UNKNOWN", 2, 3*time.Hour, 2*time.Hour),
		ref(1002, "svc-orders", "COMMITTED", 1, 23*time.Hour, 23*time.Hour-4*time.Second),
	}}
	return status, pages, batches, list
}

// screenshotBrowser is the Chromium of the screenshot tests and the fontconfig file that
// pins its fonts.
type screenshotBrowser struct {
	path, version, fontconfig string
}

// newScreenshotBrowser finds Chromium, or skips the test (fails it with REQUIRE_BROWSER=1).
func newScreenshotBrowser(t *testing.T) *screenshotBrowser {
	t.Helper()
	path := findBrowser()
	if path == "" {
		if os.Getenv("REQUIRE_BROWSER") == "1" {
			t.Fatal("REQUIRE_BROWSER=1 but no chromium binary was found (apt-get install chromium)")
		}
		t.Skip("no chromium binary found; set REQUIRE_BROWSER=1 to make this a failure")
	}
	return &screenshotBrowser{path: path, version: browserVersion(t, path), fontconfig: writeFontconfig(t)}
}

// render draws view v of the page srv serves into the PNG shot and returns the DOM, after
// checking that the page shows that view, fully drawn (a golden of a loading or error page
// would pass for ever), in the pinned fonts.
func (b *screenshotBrowser) render(t *testing.T, srv *httptest.Server, v screenshotView, shot string) string {
	t.Helper()
	dom := b.run(t, "--dump-dom", "--screenshot="+shot, fmt.Sprintf("--window-size=1280,%d", v.height), srv.URL+"/"+v.fragment)
	if !strings.Contains(dom, `data-view="`+v.view+`"`) {
		t.Fatalf("the page did not show the %s view:\n%s", v.view, mainOf(dom))
	}
	checkFontsLoaded(t, dom)
	return dom
}

// run runs headless Chromium once with the flags that make its pixels repeat: one device
// pixel per CSS pixel, no scrollbars, software rendering, no font hinting or subpixel text,
// sRGB, the time zone and locale fixed, and fontconfig limited to the pinned fonts. The page
// runs 5 s of its own (virtual) time before the screenshot, so every fetch has answered and
// the overview has redrawn.
func (b *screenshotBrowser) run(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--user-data-dir=" + t.TempDir(),
		"--virtual-time-budget=5000", "--force-device-scale-factor=1", "--hide-scrollbars",
		"--font-render-hinting=none", "--disable-font-subpixel-positioning", "--disable-lcd-text",
		"--force-color-profile=srgb", "--lang=en-US"}
	cmd := exec.CommandContext(ctx, b.path, append(base, args...)...)
	cmd.Env = append(os.Environ(), "TZ=UTC", "LANG=en_US.UTF-8", "LANGUAGE=en_US", "LC_ALL=en_US.UTF-8", "FONTCONFIG_FILE="+b.fontconfig)
	var stderr limitedBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", b.path, err, stderr.String())
	}
	return string(out)
}

func browserVersion(t *testing.T, browser string) string {
	t.Helper()
	out, err := exec.Command(browser, "--version").Output()
	if err != nil {
		t.Logf("%s --version: %v", browser, err)
	}
	if m := regexp.MustCompile(`\S+ \d+(\.\d+)+`).Find(out); m != nil {
		return string(m)
	}
	return strings.TrimSpace(string(out))
}

// mainOf is the shown <main> of a dumped DOM, for failure messages.
func mainOf(dom string) string {
	if m := regexp.MustCompile(`(?s)<main id="job"[^>]*>.*?</main>`).FindString(dom); m != "" && !strings.Contains(m[:40], "hidden") {
		return m
	}
	return regexp.MustCompile(`(?s)<main id="overview".*?</main>`).FindString(dom)
}
