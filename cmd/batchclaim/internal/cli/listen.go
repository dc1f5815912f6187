package cli

import (
	"flag"
	"fmt"
	"log/slog"
	"strings"

	"github.com/batchclaim/batchclaim/httpguard"
)

// CheckReadOnlyListen refuses a listener other hosts can reach for a command whose listener
// has no authentication and serves only what (read-only) unless the operator said
// --insecure-listen.
func CheckReadOnlyListen(addr string, insecure bool, what string) error {
	if addr == "" || insecure || httpguard.LoopbackOnly(addr) {
		return nil
	}
	return fmt.Errorf("--listen %s is not a loopback address: it would serve %s to anyone who can reach it, without "+
		"authentication; give --insecure-listen if that is intended", addr, what)
}

// WarnReachable warns at start about a listener other hosts can reach: without
// authentication (--insecure-listen), or with tokens over plain HTTP.
func WarnReachable(logger *slog.Logger, addr string, tokens, tls bool) {
	if addr == "" || httpguard.LoopbackOnly(addr) {
		return
	}
	switch {
	case !tokens:
		logger.Warn("the listener accepts requests from other hosts without authentication (--insecure-listen)", "listen", addr)
	case !tls:
		logger.Warn("bearer tokens travel in clear text: give --tls-cert and --tls-key, or terminate TLS in front", "listen", addr)
	}
}

// AllowedHostsFlag registers --allowed-hosts.
func AllowedHostsFlag(fs *flag.FlagSet) *string {
	return fs.String("allowed-hosts", "", "comma-separated host names the listener answers to besides IP addresses, localhost and the --listen host "+
		"(.example.com: a domain and its subdomains; *: any); other Host headers get 421, a defence against DNS rebinding")
}

// CheckHosts checks --allowed-hosts.
func CheckHosts(listen string, allowed []string) error {
	if _, err := httpguard.NewHosts(listen, allowed); err != nil {
		return fmt.Errorf("--allowed-hosts: %w", err)
	}
	return nil
}

// SplitList splits a comma-separated flag value, dropping empty entries.
func SplitList(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}
