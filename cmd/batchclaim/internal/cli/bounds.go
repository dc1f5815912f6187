package cli

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"time"
)

// Bounds of the numeric flags that declare none (Bound): counts and sizes from 0 to 100
// million, durations from 0 to 24 hours, fractions and other floats from 0 to 1e9. A value
// outside them is a typo or a unit mistake (99999999999 workers, 9999h), never a setting.
const (
	DefaultMaxInt      = 100_000_000
	DefaultMaxDuration = 24 * time.Hour
	DefaultMaxFloat    = 1e9
)

// bound is the range of one numeric flag: lo..hi in its own unit (nanoseconds for a
// duration), and why, said when a value is out of it.
type bound struct {
	lo, hi int64
	why    string
}

// Bound declares the range of the integer flag name of fs, in its unit (bytes, a count),
// lo and hi included; why (may be empty) says where the bound comes from. Parse refuses a
// value given outside it, on the command line or in the environment; a flag left at its
// default is not checked.
// The flag's usage text says the bound.
func Bound(fs *flag.FlagSet, name string, lo, hi int64, why string) {
	bind(fs, name, lo, hi, why, func(n int64) string { return fmt.Sprint(n) })
}

// BoundDuration is Bound for a duration flag.
func BoundDuration(fs *flag.FlagSet, name string, lo, hi time.Duration, why string) {
	bind(fs, name, int64(lo), int64(hi), why, func(n int64) string { return time.Duration(n).String() })
}

func bind(fs *flag.FlagSet, name string, lo, hi int64, why string, show func(int64) string) {
	metaOf(fs).bounds[name] = bound{lo, hi, why}
	f := fs.Lookup(name)
	switch {
	case f == nil, lo == math.MinInt64:
	case lo == 0 || lo == 1:
		f.Usage += fmt.Sprintf(" (at most %s)", show(hi))
	default:
		f.Usage += fmt.Sprintf(" (%s to %s)", show(lo), show(hi))
	}
}

// checkBounds checks every numeric flag of fs that was given (given: by name, with where it
// came from, "--name" or "environment VAR") against its bound or the defaults above.
func checkBounds(fs *flag.FlagSet, given map[string]string) error {
	m := metaOf(fs)
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		where, ok := given[f.Name]
		if !ok {
			return
		}
		g, ok := f.Value.(flag.Getter)
		if !ok {
			return
		}
		b, declared := m.bounds[f.Name]
		var v int64
		isDuration := false
		switch x := g.Get().(type) {
		case int:
			v = int64(x)
		case int64:
			v = x
		case uint:
			v = int64(min(uint64(x), math.MaxInt64))
		case uint64:
			v = int64(min(x, math.MaxInt64))
		case time.Duration:
			v, isDuration = int64(x), true
		case float64:
			if x < 0 || x > DefaultMaxFloat || math.IsNaN(x) {
				errs = append(errs, fmt.Errorf("%s %s: want 0 to %g", where, f.Value, DefaultMaxFloat))
			}
			return
		default:
			return
		}
		if !declared {
			b = bound{0, DefaultMaxInt, ""}
			if isDuration {
				b.hi = int64(DefaultMaxDuration)
			}
		}
		show := func(n int64) string {
			if isDuration {
				return time.Duration(n).String()
			}
			return fmt.Sprint(n)
		}
		why := ""
		if b.why != "" {
			why = " (" + b.why + ")"
		}
		switch {
		case v < b.lo && v <= 0 && b.lo > 0:
			def := "default " + f.DefValue
			if f.DefValue == "0" || f.DefValue == "0s" {
				def = "leave it unset for the default"
			}
			errs = append(errs, fmt.Errorf("%s %s: must be positive (%s)", where, f.Value, def))
		case v < b.lo && b.lo == 0:
			errs = append(errs, fmt.Errorf("%s %s: must not be negative", where, f.Value))
		case v < b.lo:
			errs = append(errs, fmt.Errorf("%s %s: at least %s%s", where, f.Value, show(b.lo), why))
		case v > b.hi:
			errs = append(errs, fmt.Errorf("%s %s: at most %s%s", where, f.Value, show(b.hi), why))
		}
	})
	return errors.Join(errs...)
}
