package dlt

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxRetryAfter caps a Retry-After value so that a hostile or broken server cannot park a
// caller for days.
const maxRetryAfter = 24 * time.Hour

// parseRetryAfter reads a Retry-After header value: delay seconds or an HTTP date (relative
// to now). Absent, unparseable, negative or past values give 0; values are capped at 24h.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		if secs >= int64(maxRetryAfter/time.Second) {
			return maxRetryAfter
		}
		return time.Duration(secs) * time.Second
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0
	}
	return min(max(t.Sub(now), 0), maxRetryAfter)
}
