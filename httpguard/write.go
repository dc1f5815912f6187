package httpguard

import (
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// ExtendWriteDeadline gives the answer to r, whose handler works for d before or while it
// writes (a long poll, a profile), the server's WriteTimeout after d, instead of after the
// request's headers. It does nothing on a server without a WriteTimeout; the error is
// http.ErrNotSupported when w cannot take a deadline.
func ExtendWriteDeadline(w http.ResponseWriter, r *http.Request, d time.Duration) error {
	srv, ok := r.Context().Value(http.ServerContextKey).(*http.Server)
	if !ok || srv.WriteTimeout <= 0 {
		return nil
	}
	return http.NewResponseController(w).SetWriteDeadline(time.Now().Add(d + srv.WriteTimeout))
}

// LimitSeconds wraps h, whose answer takes the seconds its request asks for (?seconds=, as the
// runtime's CPU profile, execution trace and delta profiles do), so that it works under the
// listener's write timeout yet cannot hold its connection for as long as it likes: a request
// asking for more than max is answered 400; any other has its write deadline extended by the
// seconds it asks, or by max when it asks none or gives a number h does not take (h then runs
// for its own default, which must not exceed max).
func LimitSeconds(max time.Duration, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d := max
		if v := r.FormValue("seconds"); v != "" {
			s, err := strconv.ParseFloat(v, 64)
			switch {
			case err == nil && s > max.Seconds():
				http.Error(w, fmt.Sprintf("seconds=%g is too long: at most %g here", s, max.Seconds()), http.StatusBadRequest)
				return
			case err == nil && s > 0:
				d = time.Duration(s * float64(time.Second))
			}
		}
		// Not fatal: without a deadline to move, the server's WriteTimeout still bounds h.
		_ = ExtendWriteDeadline(w, r, d)
		h.ServeHTTP(w, r)
	})
}
