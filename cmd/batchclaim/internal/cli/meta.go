package cli

import (
	"flag"
	"runtime"
	"sync"
	"weak"
)

// meta is what the package knows of a FlagSet's flags besides what the flag package keeps:
// their bounds, the secrets among them, and what Parse found to warn about.
type meta struct {
	mu       sync.Mutex
	bounds   map[string]bound
	secrets  map[string]secret // by the name of the flag that holds the value
	warnings []string
}

// metas holds the meta of each FlagSet that has one, until the FlagSet is collected.
var metas sync.Map // weak.Pointer[flag.FlagSet] -> *meta

func metaOf(fs *flag.FlagSet) *meta {
	key := weak.Make(fs)
	if m, ok := metas.Load(key); ok {
		return m.(*meta)
	}
	m, loaded := metas.LoadOrStore(key, &meta{bounds: map[string]bound{}, secrets: map[string]secret{}})
	if !loaded {
		runtime.AddCleanup(fs, func(k weak.Pointer[flag.FlagSet]) { metas.Delete(k) }, key)
	}
	return m.(*meta)
}

// warn records a warning once.
func (m *meta) warn(w string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, have := range m.warnings {
		if have == w {
			return
		}
	}
	m.warnings = append(m.warnings, w)
}

// Warnings are what Parse found that the operator should hear about (a secret given on the
// command line), for the command to log. The logger LogFlags builds logs them itself.
func Warnings(fs *flag.FlagSet) []string {
	m := metaOf(fs)
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.warnings...)
}
