package main

import "testing"

func TestMultiHost(t *testing.T) {
	t.Parallel()
	for url, want := range map[string]bool{
		"postgres://u@127.0.0.1:5432/db":                                                false,
		"postgres://u@127.0.0.1:5432/db?sslmode=prefer":                                 false, // two fallbacks, one host
		"postgres://u@127.0.0.1:5432,127.0.0.1:5433/db?target_session_attrs=read-write": true,
		"postgres://u@a:5432,b:5432/db":                                                 true,
		"not a url%%":                                                                   false,
	} {
		if got := multiHost(url); got != want {
			t.Errorf("multiHost(%q) = %t, want %t", url, got, want)
		}
	}
}
