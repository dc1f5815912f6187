package redact

import (
	"net/url"
	"regexp"
	"strings"
)

// redactedParams are the query parameters of a database URL that hold secrets.
var redactedParams = []string{"password", "sslpassword"}

// kvPassword matches a password in a keyword/value connection string
// (host=db user=app password='s e c r e t').
var kvPassword = regexp.MustCompile(`(?i)\b(password|sslpassword)\s*=\s*('(?:[^'\\]|\\.)*'|\S+)`)

// URL returns a database or ledger URL fit for logs and messages: the password of the user
// info and the values of password query parameters become "xxxxx"; a keyword/value
// connection string gets the same treatment; an unparseable URL is replaced whole.
func URL(raw string) string {
	if !strings.Contains(raw, "://") {
		return kvPassword.ReplaceAllString(raw, "${1}=xxxxx")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparseable URL)"
	}
	q := u.Query()
	changed := false
	for _, p := range redactedParams {
		for k := range q {
			if strings.EqualFold(k, p) {
				q[k] = []string{"xxxxx"}
				changed = true
			}
		}
	}
	if changed {
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// HasSecret reports whether a database or ledger URL (or a keyword/value connection string)
// holds a password: in its user info, in a password or sslpassword parameter. A URL that
// cannot be parsed is taken to hold one.
func HasSecret(raw string) bool {
	if !strings.Contains(raw, "://") {
		return kvPassword.MatchString(raw)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return true
	}
	if _, ok := u.User.Password(); ok {
		return true
	}
	for k := range u.Query() {
		for _, p := range redactedParams {
			if strings.EqualFold(k, p) {
				return true
			}
		}
	}
	return false
}
