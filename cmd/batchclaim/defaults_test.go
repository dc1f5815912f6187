package main

import (
	"context"
	"io"
	"reflect"
	"testing"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/node"
)

// An embedded node given a zero node.Config behaves as run given no flags: every field's zero
// value means run's flag default. Listen differs on purpose (an embedder serves no HTTP
// unless it asks), as does Claims.RequireSyncStandby (run derives it from the URL).
func TestRunDefaultsAreTheLibrarysZeroValues(t *testing.T) {
	t.Parallel()
	f := newRunFlags(io.Discard)
	if err := f.fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	resolve := func(c node.Config) node.Config {
		t.Helper()
		r, err := c.Resolve()
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// run is a ledger pipeline: compare with the library's zero values for one (a status
	// source set), which differ from a job runner's in MaxAttempts alone.
	flags, lib := reflect.ValueOf(f.cfg), reflect.ValueOf(resolve(node.Config{Statuses: noStatuses{}}))
	for i := range flags.NumField() {
		name := flags.Type().Field(i).Name
		switch name {
		case "Listen", "Claims":
			continue
		}
		a, b := flags.Field(i), lib.Field(i)
		if a.Kind() == reflect.Func || a.Kind() == reflect.Pointer || a.Kind() == reflect.Interface {
			continue // hooks and collaborators, not flags
		}
		if !reflect.DeepEqual(a.Interface(), b.Interface()) {
			t.Errorf("node.Config.%s: run's flag default is %v, the library's zero value means %v", name, a.Interface(), b.Interface())
		}
	}
	if got := resolve(node.Config{}).MaxAttempts; got != node.MaxAttemptsDefault {
		t.Errorf("a job runner's MaxAttempts: %d, want %d", got, node.MaxAttemptsDefault)
	}
	if f.cfg.Listen != "127.0.0.1:8080" || resolve(node.Config{}).Listen != "" {
		t.Errorf("Listen: run %q, library %q; want run on loopback and no listener for an embedder", f.cfg.Listen, resolve(node.Config{}).Listen)
	}

	cc := f.cfg.Claims
	cc.KnobNames = nil // the flags' names for error messages
	runTimings, err := cc.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	libTimings, err := node.Config{}.Claims.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if runTimings.Timings() != libTimings.Timings() {
		t.Errorf("claim timings: run %+v, library %+v", runTimings.Timings(), libTimings.Timings())
	}
	if cc.DropIdleAfter != 0 || cc.ShareSlack != 0 || cc.Name != "" {
		t.Errorf("claims: run's defaults drop idle after %s, share slack %d, name %q; the library's zero values are 0, 0, \"\"", cc.DropIdleAfter, cc.ShareSlack, cc.Name)
	}
}

// noStatuses stands for a ledger's status source.
type noStatuses struct{}

func (noStatuses) Statuses(context.Context, []string) ([]batchclaim.LedgerStatus, error) {
	return nil, nil
}
