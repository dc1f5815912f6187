package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// The example runs against a fresh database and does what it says: its kinds run, each order's
// jobs in order (a receipt after a failed first attempt, with its output), a charge ends at its
// own timeout, one snoozes, one is cancelled while it runs, the rolled-back order has no job,
// and the periodic sales report runs.
func TestExampleRuns(t *testing.T) {
	t.Parallel()
	var out testutil.SyncBuffer
	if err := run(t.Context(), dbtest.NewDB(t), &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	got := out.String()
	t.Logf("the example's output:\n%s", got)
	for _, want := range []string{
		`order-1: charged 12\.50`,
		`order-1: charge_card attempt 1 under epoch \d+: done`,
		`order-1: send_receipt attempt 1 under epoch \d+: retry \(mail server busy\)`,
		`order-1: receipt mailed to ann@example\.com`,
		`order-1: send_receipt attempt 2 under epoch \d+: done`,
		`order-2: charge_card attempt 1 under epoch \d+: discard \(card network: context deadline exceeded\)`,
		`order-4: charge_card attempt 1 under epoch \d+: snooze \(snoozed for 200ms\)`,
		`order-4: charged 42\.00`,
		`order-4: charge_card attempt 2 under epoch \d+: done`,
		`order-5: cancel requested while the charge runs \(INFLIGHT, cancel requested: true\)`,
		`order-5: charge stopped: job cancelled: the customer cancelled the order`,
		`order-5: charge_card attempt 1 under epoch \d+: cancelled \(context canceled\)`,
	} {
		if !regexp.MustCompile(`(?m)^` + want + `$`).MatchString(got) {
			t.Errorf("the output lacks a line matching %s", want)
		}
	}
	// The first order's lines in its jobs' order; then the report of every job.
	if i, j := strings.Index(got, "order-1: charge_card attempt 1"), strings.Index(got, "order-1: send_receipt attempt 1"); i < 0 || j < i {
		t.Errorf("order-1's receipt ran before its charge")
	}
	i := strings.Index(got, "\njobs:\n")
	if i < 0 {
		t.Fatal("no report of the jobs")
	}
	report := got[i+1:]
	for _, re := range []string{
		`(?m)^  order-1 charge_card\s+COMMITTED\s+after 1 attempt\(s\)\s*$`,
		`(?m)^  order-1 send_receipt\s+COMMITTED\s+after 2 attempt\(s\)\s+\{"receipt": "R-1"\}$`,
		`(?m)^  order-2 charge_card\s+DISCARDED\s+after 1 attempt\(s\)\s+discarded after 1 of 1 attempts: timed out after 300ms \(the job's own timeout\): card network: context deadline exceeded$`,
		`(?m)^  order-4 charge_card\s+COMMITTED\s+after 2 attempt\(s\)\s*$`,
		`(?m)^  order-4 send_receipt\s+COMMITTED\s+after 2 attempt\(s\)\s+\{"receipt": "R-4"\}$`,
		`(?m)^  order-5 charge_card\s+CANCELLED\s+after 1 attempt\(s\)\s+the customer cancelled the order$`,
		`(?m)^periodic: periodic/sales-report/<tick> COMMITTED  \{"orders": 4\}$`,
	} {
		if !regexp.MustCompile(re).MatchString(report) {
			t.Errorf("the report lacks a line matching %s", re)
		}
	}
	if strings.Contains(got, "order-3") || strings.Contains(got, "cy@example.com") {
		t.Errorf("the rolled-back order's jobs ran or were stored")
	}
}
