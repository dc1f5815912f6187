package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/batchclaim/batchclaim/httpauth"
	"github.com/batchclaim/batchclaim/httpguard"
)

// loopbackOnly reports whether addr (host:port) accepts connections from this machine only
// (httpguard.LoopbackOnly).
func loopbackOnly(addr string) bool { return httpguard.LoopbackOnly(addr) }

// checkListen refuses a listener other hosts can reach when nothing authenticates its
// requests, unless the operator said --insecure-listen.
func checkListen(addr string, tokenFile string, insecure bool) error {
	if addr == "" || tokenFile != "" || insecure || loopbackOnly(addr) {
		return nil
	}
	return fmt.Errorf("--listen %s is not a loopback address and no --auth-token-file is set, so anyone who can reach it "+
		"could post batches: give --auth-token-file FILE, or --insecure-listen if something in front of it authenticates", addr)
}

// checkTLSFlags loads the listener's certificate and key at start, so that a bad file is
// reported with the flags that name it before anything else starts.
func checkTLSFlags(cert, key string) error {
	if cert == "" && key == "" {
		return nil
	}
	if cert == "" || key == "" {
		return errors.New("--tls-cert and --tls-key go together: give both or neither")
	}
	if _, err := tls.LoadX509KeyPair(cert, key); err != nil {
		return fmt.Errorf("--tls-cert %s / --tls-key %s: %w", cert, key, err)
	}
	return nil
}

// loadTokens loads --auth-token-file (nil without one), naming the flag in errors and
// logging what the operator should know about the file.
func loadTokens(path string, logger *slog.Logger) (*httpauth.Tokens, error) {
	if path == "" {
		return nil, nil
	}
	tokens, err := httpauth.LoadTokens(path)
	if err != nil {
		return nil, fmt.Errorf("--auth-token-file: %w", err)
	}
	for _, p := range tokens.Problems() {
		logger.Warn(p)
	}
	return tokens, nil
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
			for _, p := range tokens.Problems() {
				logger.Warn(p)
			}
		}
	}()
}
