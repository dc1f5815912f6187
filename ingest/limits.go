package ingest

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
)

// budget is a count of bytes that requests reserve before they allocate them and give back
// when they end, so that the bytes of request bodies (and of their decoded copies) held at
// once never exceed its size, however many clients send at once.
type budget struct {
	size int64
	used atomic.Int64
}

// reserve takes n bytes, or reports false (taking nothing) when fewer are left.
func (b *budget) reserve(n int64) bool {
	for {
		used := b.used.Load()
		if used+n > b.size {
			return false
		}
		if b.used.CompareAndSwap(used, used+n) {
			return true
		}
	}
}

func (b *budget) release(n int64) { b.used.Add(-n) }

// hold is what one request has reserved from a budget; done gives it back.
type hold struct {
	b *budget
	n int64
}

func (h *hold) take(n int64) bool {
	if !h.b.reserve(n) {
		return false
	}
	h.n += n
	return true
}

func (h *hold) give(n int64) { h.b.release(n); h.n -= n }

func (h *hold) done() { h.b.release(h.n); h.n = 0 }

// Errors of readBody.
var (
	errTooLarge   = errors.New("body too large")
	errOverBudget = errors.New("ingest memory budget exhausted")
)

// Buffer sizes of readBody: a body's bytes are read into a small scratch buffer whenever its
// buffer is full, so that a buffer is reserved and grown only for bytes that have arrived;
// the first buffer holds at least minChunk.
const (
	scratchSize = 512
	minChunk    = 4 << 10
)

// readBody reads r's body, at most limit bytes, into a buffer reserved from h as its bytes
// arrive, never from what the request announces: a client that announces a large body and
// sends nothing holds nothing, and one that sent n bytes holds at most max(4 KiB, 2n) (the
// buffer doubles, and the one it replaces is given back once copied). declared is the
// request's Content-Length (-1 if unknown): a body longer than limit is refused at once, and
// the buffer never grows past it. It fails with errTooLarge beyond limit, errOverBudget when
// the budget cannot cover the next buffer, or the read's own error.
func readBody(r io.Reader, declared, limit int64, h *hold) ([]byte, error) {
	if declared > limit {
		return nil, errTooLarge
	}
	ceiling := limit + 1 // one byte more than allowed tells an oversized body of unknown length
	if declared >= 0 {
		ceiling = declared
	}
	var buf []byte
	scratch := make([]byte, scratchSize)
	for int64(len(buf)) < ceiling {
		var n int
		var err error
		if len(buf) < cap(buf) { // room that arrived bytes paid for
			n, err = r.Read(buf[len(buf):cap(buf)])
			buf = buf[:len(buf)+n]
		} else { // full: wait for bytes before reserving more
			n, err = r.Read(scratch[:min(int64(len(scratch)), ceiling-int64(len(buf)))])
			if n > 0 {
				next := min(max(2*int64(cap(buf)), int64(len(buf)+n), minChunk), ceiling)
				if !h.take(next) {
					return nil, errOverBudget
				}
				grown := make([]byte, len(buf), next)
				copy(grown, buf)
				h.give(int64(cap(buf)))
				buf = append(grown, scratch[:n]...)
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if int64(len(buf)) > limit {
		return nil, errTooLarge
	}
	if declared >= 0 && int64(len(buf)) < declared {
		return nil, io.ErrUnexpectedEOF
	}
	return buf, nil
}

// slots bounds the requests being worked on at once. A request takes one only once its
// body has arrived, so clients that send slowly hold none.
type slots chan struct{}

func (s slots) tryAcquire() bool {
	select {
	case s <- struct{}{}:
		return true
	default:
		return false
	}
}

func (s slots) acquire(ctx context.Context) error {
	select {
	case s <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s slots) release() { <-s }

// keyLocks serializes, within this process, the requests that store batches of one
// service_id: the database serializes them anyway (the enqueue lock), and a request waiting
// here holds no connection while it waits.
type keyLocks struct {
	mu    sync.Mutex
	locks map[string]*keyLock
}

type keyLock struct {
	ch   chan struct{}
	refs int
}

// lock waits for key's turn until ctx ends; the returned function ends the turn.
func (k *keyLocks) lock(ctx context.Context, key string) (func(), error) {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*keyLock{}
	}
	l := k.locks[key]
	if l == nil {
		l = &keyLock{ch: make(chan struct{}, 1)}
		k.locks[key] = l
	}
	l.refs++
	k.mu.Unlock()
	unref := func() {
		k.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
	select {
	case l.ch <- struct{}{}:
		return func() { <-l.ch; unref() }, nil
	case <-ctx.Done():
		unref()
		return nil, ctx.Err()
	}
}
