package chaos

import (
	"strings"
	"testing"
)

// Every fault kind has a row in faults, and every row is a kind a Config may name: inject
// knows every fault a run draws.
func TestFaultTable(t *testing.T) {
	t.Parallel()
	kinds := Kinds()
	for _, k := range kinds {
		if faults[k] == nil {
			t.Errorf("fault kind %s has no row in faults", k)
		}
	}
	if len(faults) != len(kinds) {
		t.Errorf("faults has %d rows, Kinds %d: %v", len(faults), len(kinds), kinds)
	}
	err := (&run{}).inject(t.Context(), "no_such_fault", nil)
	if err == nil || !strings.Contains(err.Error(), `unknown fault kind "no_such_fault"`) {
		t.Errorf("inject of an unknown kind: %v", err)
	}
}
