package batchclaim_test

import (
	"testing"

	"github.com/batchclaim/batchclaim"
)

// Every ledger status leads to its batch state, and anything unrecognised to UNKNOWN.
func TestStatusState(t *testing.T) {
	t.Parallel()
	for st, want := range map[batchclaim.Status]batchclaim.State{
		batchclaim.StatusPending:   batchclaim.StatePending,
		batchclaim.StatusInvalid:   batchclaim.StateInvalid,
		batchclaim.StatusValid:     batchclaim.StateValid,
		batchclaim.StatusCommitted: batchclaim.StateCommitted,
		batchclaim.StatusUnknown:   batchclaim.StateUnknown,
		"":                         batchclaim.StateUnknown,
		"GARBLED":                  batchclaim.StateUnknown,
	} {
		if got := st.State(); got != want {
			t.Errorf("Status(%q).State() = %s, want %s", st, got, want)
		}
		if got := (batchclaim.LedgerStatus{Status: st}).State(); got != want {
			t.Errorf("LedgerStatus{%q}.State() = %s, want %s", st, got, want)
		}
	}
}

// A verdict names the ledger status it implies, and none when it implies nothing; where it
// names one, that status leads to the verdict's own state.
func TestVerdictStatus(t *testing.T) {
	t.Parallel()
	for v, want := range map[batchclaim.Verdict]batchclaim.Status{
		batchclaim.Done:     batchclaim.StatusCommitted,
		batchclaim.Accepted: batchclaim.StatusPending,
		batchclaim.Rejected: batchclaim.StatusInvalid,
		batchclaim.Retry:    "",
		batchclaim.Unknown:  "",
		batchclaim.Discard:  "",
	} {
		got := v.Status()
		if got != want {
			t.Errorf("%s.Status() = %q, want %q", v, got, want)
		}
		if got != "" && got.State() != v.State() {
			t.Errorf("%s: status %s leads to %s, verdict to %s", v, got, got.State(), v.State())
		}
	}
	if got := batchclaim.Retry.State(); got != batchclaim.StateDelayed {
		t.Errorf("retry leads to %s, want DELAYED", got)
	}
	if got := batchclaim.Unknown.State(); got != batchclaim.StateUnknown {
		t.Errorf("unknown leads to %s, want UNKNOWN", got)
	}
	if got := batchclaim.Discard.State(); got != batchclaim.StateDiscarded {
		t.Errorf("discard leads to %s, want DISCARDED", got)
	}
}

// The status reported for a stored batch is final only for a final state.
func TestStateStatus(t *testing.T) {
	t.Parallel()
	for _, s := range batchclaim.States {
		want := batchclaim.StatusPending
		switch s {
		case batchclaim.StateCommitted:
			want = batchclaim.StatusCommitted
		case batchclaim.StateInvalid:
			want = batchclaim.StatusInvalid
		case batchclaim.StateDiscarded, batchclaim.StateCancelled:
			want = batchclaim.StatusUnknown
		}
		if got := s.Terminal(); got != (want != batchclaim.StatusPending) {
			t.Errorf("%s.Terminal() = %v", s, got)
		}
		if got := s.Status(); got != want {
			t.Errorf("%s.Status() = %s, want %s", s, got, want)
		}
	}
}

// Invalid transactions are stored as the JSON array the recorder has always written; a status
// without any stores nothing.
func TestLedgerStatusInvalidDetails(t *testing.T) {
	t.Parallel()
	got, err := batchclaim.LedgerStatus{Status: batchclaim.StatusInvalid, Invalid: []batchclaim.InvalidTransaction{
		{ID: "t1", Message: "bad", ExtendedData: []byte("xy")},
	}}.InvalidDetails()
	if want := `[{"ID":"t1","Message":"bad","ExtendedData":"eHk="}]`; err != nil || string(got) != want {
		t.Fatalf("InvalidDetails = %s, %v; want %s", got, err, want)
	}
	if got, err := (batchclaim.LedgerStatus{Status: batchclaim.StatusCommitted}).InvalidDetails(); got != nil || err != nil {
		t.Fatalf("no invalid transactions: %s, %v; want nil", got, err)
	}
}
