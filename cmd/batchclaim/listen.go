package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/batchclaim/batchclaim/internal/httpauth"
)

// loopbackOnly reports whether addr (host:port) accepts connections from this machine only.
// An empty host (":8080") means every interface; a host name other than localhost is not
// trusted to stay on the loopback.
func loopbackOnly(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkListen refuses a listener other hosts can reach when nothing authenticates its
// requests, unless the operator said --insecure-listen.
func checkListen(addr string, tokenFile string, insecure bool) error {
	if addr == "" || tokenFile != "" || insecure || loopbackOnly(addr) {
		return nil
	}
	return fmt.Errorf("--listen %s is not a loopback address and no --auth-token-file is set, so anyone who can reach it "+
		"could post batches: give --auth-token-file FILE, or --insecure-listen if something in front of it authenticates", addr)
}

// reloadOnSIGHUP reloads the token file on every SIGHUP until ctx ends. A failed reload keeps
// the previous tokens. Without tokens a SIGHUP is only logged (it no longer ends the process).
func reloadOnSIGHUP(ctx context.Context, tokens *httpauth.Tokens, logger *slog.Logger) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	go func() {
		defer signal.Stop(ch)
		for {
			select {
			case <-ctx.Done():
				return
			case <-ch:
			}
			if tokens == nil {
				logger.Info("SIGHUP: nothing to reload (no --auth-token-file)")
				continue
			}
			if err := tokens.Reload(); err != nil {
				logger.Error("SIGHUP: token file not reloaded; the previous tokens stay in force", "error", err)
				continue
			}
			logger.Info("SIGHUP: token file reloaded", "path", tokens.Path(), "tokens", tokens.Len())
		}
	}()
}
