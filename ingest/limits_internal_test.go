package ingest

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// readBody reserves every buffer before allocating it, never more than the budget, and a
// request gives everything back when it ends.
func TestReadBody(t *testing.T) {
	t.Parallel()
	const limit = 1 << 20
	for _, tt := range []struct {
		name     string
		size     int
		declared bool
		budget   int64
		want     error
		maxHeld  int64 // the most the request may hold at the end
	}{
		{"small, announced", 1000, true, 1 << 20, nil, 1000},
		{"large, announced: exact final buffer", limit, true, 4 << 20, nil, limit},
		{"large, unknown length", 300 << 10, false, 4 << 20, nil, 512 << 10},
		{"at the limit, unknown length", limit, false, 4 << 20, nil, limit + 1},
		{"over the limit, announced", limit + 1, true, 4 << 20, errTooLarge, 0},
		{"over the limit, unknown length", limit + 1, false, 4 << 20, errTooLarge, limit + 1},
		{"over the budget", limit, true, 100 << 10, errOverBudget, 100 << 10},
		{"empty", 0, true, 1 << 20, nil, 0},
	} {
		body := bytes.Repeat([]byte{7}, tt.size)
		declared := int64(-1)
		if tt.declared {
			declared = int64(tt.size)
		}
		b := &budget{size: tt.budget}
		h := &hold{b: b}
		got, err := readBody(iotest.HalfReader(bytes.NewReader(body)), declared, limit, h)
		switch {
		case !errors.Is(err, tt.want):
			t.Errorf("%s: error %v, want %v", tt.name, err, tt.want)
		case err == nil && !bytes.Equal(got, body):
			t.Errorf("%s: read %d bytes, want %d", tt.name, len(got), len(body))
		case err == nil && int64(cap(got)) != h.n:
			t.Errorf("%s: buffer of %d bytes, %d reserved", tt.name, cap(got), h.n)
		}
		if h.n > tt.maxHeld || b.used.Load() != h.n || h.n > tt.budget {
			t.Errorf("%s: holds %d (budget used %d of %d), want at most %d", tt.name, h.n, b.used.Load(), tt.budget, tt.maxHeld)
		}
		h.done()
		if b.used.Load() != 0 {
			t.Errorf("%s: %d bytes still reserved after the request ended", tt.name, b.used.Load())
		}
	}
}

// A body that ends before its announced length is a read error, not a short body.
func TestReadBodyCutShort(t *testing.T) {
	t.Parallel()
	for _, r := range []io.Reader{bytes.NewReader(make([]byte, 50)), iotest.ErrReader(io.ErrUnexpectedEOF)} {
		h := &hold{b: &budget{size: 1 << 20}}
		if _, err := readBody(r, 100, 1000, h); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("error %v, want %v", err, io.ErrUnexpectedEOF)
		}
	}
}

// trickle is a body whose bytes the test hands over one write at a time; each Read says on
// reading that it waits, so that the test looks at the budget while the reader is blocked.
type trickle struct {
	reading chan struct{}
	data    chan []byte
	pending []byte
}

func (t *trickle) Read(p []byte) (int, error) {
	if len(t.pending) == 0 {
		t.reading <- struct{}{}
		b, ok := <-t.data
		if !ok {
			return 0, io.EOF
		}
		t.pending = b
	}
	n := copy(p, t.pending)
	t.pending = t.pending[n:]
	return n, nil
}

// A body is reserved as its bytes arrive, never from its Content-Length: announced at 256
// KiB and not yet sent, it holds nothing; after one byte, the first small buffer; then at
// most twice what arrived.
func TestReadBodyReservesAsBytesArrive(t *testing.T) {
	t.Parallel()
	const announced = 256 << 10
	b := &budget{size: 1 << 20}
	h := &hold{b: b}
	body := &trickle{reading: make(chan struct{}), data: make(chan []byte)}
	type result struct {
		got []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		got, err := readBody(body, announced, 1<<20, h)
		done <- result{got, err}
	}()
	<-body.reading
	if used := b.used.Load(); used != 0 {
		t.Fatalf("a body announced at %d bytes holds %d before a byte arrived, want 0", announced, used)
	}
	sent := 0
	for _, n := range []int{1, 100, 5000, 30000, 100000} {
		body.data <- bytes.Repeat([]byte{7}, n)
		sent += n
		<-body.reading
		if used := b.used.Load(); used > max(minChunk, 2*int64(sent)) {
			t.Fatalf("after %d bytes, %d reserved; want at most max(4 KiB, twice what arrived)", sent, used)
		}
	}
	body.data <- bytes.Repeat([]byte{7}, announced-sent)
	r := <-done
	if r.err != nil || len(r.got) != announced || b.used.Load() != announced {
		t.Fatalf("%d bytes, error %v, %d reserved; want the whole body in a buffer of its size", len(r.got), r.err, b.used.Load())
	}
}
