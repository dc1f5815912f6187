package wallclock

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// EnvRate names the environment variable LoadRate reads: a schedule of clock rates, each
// held for a while, repeated from the moment LoadRate runs, such as "1:20s,0.8:15s,1.2:15s"
// (the local clock runs at full speed for 20 s, 20 % slow for 15 s, 20 % fast for 15 s,
// then again). A rate is how many seconds this host counts while one real second passes.
const EnvRate = "BATCHCLAIM_TEST_CLOCK_RATE"

type rateStep struct {
	rate float64
	hold time.Duration
}

var rates struct {
	sync.Mutex
	steps []rateStep
	from  time.Time
	cycle time.Duration
}

// LoadRate sets the schedule from EnvRate (unset or empty: none, every rate 1). The error
// names the variable. Rates lie in (0.25, 4].
func LoadRate() error {
	v := os.Getenv(EnvRate)
	rates.Lock()
	defer rates.Unlock()
	rates.steps, rates.cycle, rates.from = nil, 0, time.Now()
	if v == "" {
		return nil
	}
	for _, part := range strings.Split(v, ",") {
		r, d, ok := strings.Cut(strings.TrimSpace(part), ":")
		rate, rerr := strconv.ParseFloat(r, 64)
		hold, derr := time.ParseDuration(d)
		if !ok || rerr != nil || derr != nil || rate <= 0.25 || rate > 4 || hold <= 0 {
			rates.steps, rates.cycle = nil, 0
			return fmt.Errorf("%s=%q: want rate:duration pairs such as 1:20s,0.8:15s (a rate in (0.25, 4])", EnvRate, v)
		}
		rates.steps = append(rates.steps, rateStep{rate, hold})
		rates.cycle += hold
	}
	return nil
}

// Rate is the rate of this host's clock at now (a reading of time.Now) by the schedule
// LoadRate set: 1 without one.
func Rate(now time.Time) float64 {
	rates.Lock()
	defer rates.Unlock()
	if rates.cycle == 0 {
		return 1
	}
	at := now.Sub(rates.from) % rates.cycle
	for _, s := range rates.steps {
		if at < s.hold {
			return s.rate
		}
		at -= s.hold
	}
	return rates.steps[len(rates.steps)-1].rate
}

// Span is how long, in real time from now, this host's clock takes to count d at its rate
// now: d itself without a schedule. The local deadline of a lease measures its window with it,
// so that a host whose clock runs slow (a rate below 1) keeps working on its claims for longer
// than it believes, as such a host would.
func Span(now time.Time, d time.Duration) time.Duration {
	r := Rate(now)
	if r == 1 {
		return d
	}
	return time.Duration(float64(d) / r)
}
