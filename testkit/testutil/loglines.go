package testutil

import (
	"encoding/json"
	"strings"
)

// SiteLines counts the JSON log lines in logs (one a line; others skipped) that the log site
// msg wrote: its own lines, whose message is msg, and the counts a throttle writes for it,
// whose message is msg followed by ": N more like this ...".
func SiteLines(logs, msg string) int {
	n := 0
	for line := range strings.Lines(logs) {
		var l struct {
			Msg string `json:"msg"`
		}
		if json.Unmarshal([]byte(line), &l) != nil {
			continue
		}
		if rest, ok := strings.CutPrefix(l.Msg, msg); ok && (rest == "" || strings.Contains(rest, " more like this in the last ")) {
			n++
		}
	}
	return n
}
