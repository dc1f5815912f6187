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
