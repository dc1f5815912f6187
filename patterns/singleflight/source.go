package singleflight

import (
	"context"
	"fmt"
	"time"
)

// Source is the slow origin of the cached values, provided by the embedder. Fetch is called
// by at most one instance per key at a time (while it holds the key's fetch lease), on a
// context that is cancelled when the call passes MaxFetchTime, when the fetcher loses its
// lease, or when the cache stops. A Source should honour that context: a call that ignores it
// still cannot store its result once another instance has taken the lease over.
type Source interface {
	Fetch(ctx context.Context, req Request) ([]byte, error)
}

// SourceFunc adapts a function to Source.
type SourceFunc func(ctx context.Context, req Request) ([]byte, error)

// Fetch calls f.
func (f SourceFunc) Fetch(ctx context.Context, req Request) ([]byte, error) { return f(ctx, req) }

// Request is one call of the source: the key, and the fetch epoch of the lease it runs under
// (larger than every earlier epoch of the key; useful for logs and for fencing writes the
// source itself makes).
type Request struct {
	Key   string
	Epoch int64
}

// Entry is what Get returns: a value and where it came from.
type Entry struct {
	Key   string
	Value []byte
	// Epoch is the fetch epoch that produced Value.
	Epoch int64
	// FetchedAt is when the value was stored and ExpiresAt until when it is fresh, both by
	// the database clock. ExpiresAt was fixed when the fetch began.
	FetchedAt, ExpiresAt time.Time
	// Stale is true when the value was past ExpiresAt when read: returned at once to a caller
	// that allowed stale values, or the result of a fetch that outlasted the TTL.
	Stale bool
}

// SourceError is a source's error, returned by Get to the caller whose fetch failed and to
// every caller on any instance that waited for that fetch or asked while the negative result
// was kept (Config.ErrorTTL). Across instances only the message travels; Unwrap returns the
// original error only in the instance that called the source.
type SourceError struct {
	Key     string
	Epoch   int64
	Message string
	err     error
}

func (e *SourceError) Error() string {
	return fmt.Sprintf("source failed for key %q (fetch epoch %d): %s", e.Key, e.Epoch, e.Message)
}

// Unwrap returns the source's own error in the instance that called it, else nil.
func (e *SourceError) Unwrap() error { return e.err }
