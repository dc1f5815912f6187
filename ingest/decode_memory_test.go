package ingest

import (
	"errors"
	"fmt"
	"runtime"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/batchclaim/batchclaim/dlt"
)

// Decoding a POST /batches body allocates no more than the handler reserves for it before it
// starts, for the bodies that cost the most per byte: one batch with a huge header (once
// copied twice), one batch of tens of thousands of transactions (each id once copied), and a
// list of tens of thousands of the smallest batches (each with an id, a Batch and an entry in
// the duplicate check), whether or not it decodes. What stays live after decoding is
// measured with the result kept, and what was allocated in all bounds what was live at any
// moment during it.
func TestDecodeMemoryWithinReservation(t *testing.T) {
	// Not parallel: the heap is measured around each decode, and parallel tests wait until
	// this one ends.
	const size = 4 << 20
	// 28,728 batches give the duplicate check's map the most slots an entry: 64 tables of
	// 1,024 slots where 513 would be full enough.
	const smallest = 28728
	tests := []struct {
		name    string
		body    []byte
		batches int // 0: refused
	}{
		{"one batch with a 4 MiB header", dlt.NewBatchList(batchOf(make([]byte, size), batchID(0))), 1},
		{"transactions of an id alone", dlt.NewBatchList(batchOf(nil, batchID(0), repeatTxn(size, batchID(1))...)), 1},
		{"empty transactions", dlt.NewBatchList(batchOf(nil, batchID(0), repeatTxn(size, "")...)), 1},
		{"the smallest batches", smallestBatches(smallest), smallest},
		{"the smallest batches, then a repeat", append(smallestBatches(smallest), dlt.NewBatchList(batchOf(nil, batchID(7)))...), 0},
		{"the smallest batches, then one too short to hold an id", append(smallestBatches(smallest), dlt.NewBatchList(batchOf(nil, "abc"))...), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := &hold{b: &budget{size: 1 << 40}}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			batches, err := decodeBatches(tt.body, mem)
			runtime.GC()
			runtime.ReadMemStats(&after)
			if (err != nil) != (tt.batches == 0) || len(batches) != tt.batches {
				t.Fatalf("decoded %d batches, %v; want %d", len(batches), err, tt.batches)
			}
			live := int64(after.HeapAlloc) - int64(before.HeapAlloc)
			allocated := int64(after.TotalAlloc - before.TotalAlloc)
			t.Logf("%d-byte body: %d bytes reserved, %d live after decoding, %d allocated", len(tt.body), mem.n, live, allocated)
			// The counters are the whole process's: whatever else allocated in the meantime (the
			// runtime, a timer) is counted too, up to noise, which the margin absorbs. The old
			// decoding took 2 to 9 times its reservation here, megabytes over it.
			const noise = 64 << 10
			if live > mem.n+noise {
				t.Errorf("the decoded batches hold %d bytes, more than the %d reserved", live, mem.n)
			}
			if allocated > mem.n+noise {
				t.Errorf("decoding allocated %d bytes, more than the %d reserved", allocated, mem.n)
			}
			runtime.KeepAlive(batches)
			runtime.KeepAlive(tt.body)
		})
	}
}

// batchID returns the valid batch id of i.
func batchID(i int) string { return fmt.Sprintf("%0128x", i) }

// batchOf encodes a Batch message with a header (none if nil), an id and transactions.
func batchOf(header []byte, id string, txns ...[]byte) []byte {
	var b []byte
	if header != nil {
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendBytes(b, header)
	}
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendString(b, id)
	for _, txn := range txns {
		b = protowire.AppendTag(b, 3, protowire.BytesType)
		b = protowire.AppendBytes(b, txn)
	}
	return b
}

// repeatTxn returns as many copies of a Transaction holding only the header signature sig
// (nothing if empty) as fill size bytes of a Batch.
func repeatTxn(size int, sig string) [][]byte {
	var txn []byte
	if sig != "" {
		txn = protowire.AppendTag(txn, 2, protowire.BytesType)
		txn = protowire.AppendString(txn, sig)
	}
	n := size / (1 + protowire.SizeBytes(len(txn)))
	txns := make([][]byte, n)
	for i := range txns {
		txns[i] = txn
	}
	return txns
}

// smallestBatches returns a BatchList of n batches holding only their ids.
func smallestBatches(n int) []byte {
	var list []byte
	for i := range n {
		list = append(list, dlt.NewBatchList(batchOf(nil, batchID(i)))...)
	}
	return list
}

// A body is decoded only once what decoding it takes is reserved: a request that cannot
// reserve it now is busy, and one that could not even alone is refused as too large, since
// waiting would not help.
func TestDecodeReservesFirst(t *testing.T) {
	t.Parallel()
	body := smallestBatches(1000)
	need := dlt.SplitBatchListMemory(body)
	if need < 3*int64(len(body)) {
		t.Fatalf("%d bytes of the smallest batches reserve %d bytes to decode, want 3 x more", len(body), need)
	}
	decode := func(b *budget) error {
		mem := &hold{b: b}
		defer mem.done()
		if !mem.take(int64(len(body))) { // the body's buffer
			t.Fatal("the body does not fit")
		}
		_, err := decodeBatches(body, mem)
		return err
	}
	if err := decode(&budget{size: int64(len(body)) + need - 1}); !errors.Is(err, errTooLarge) {
		t.Fatalf("with 1 byte too few in the budget: %v, want %v", err, errTooLarge)
	}
	b := &budget{size: int64(len(body)) + need}
	other := &hold{b: b}
	other.take(1)
	if err := decode(b); !errors.Is(err, errOverBudget) {
		t.Fatalf("with 1 byte of the budget held by another request: %v, want %v", err, errOverBudget)
	}
	other.done()
	if err := decode(b); err != nil {
		t.Fatalf("with the whole budget: %v", err)
	}
	if used := b.used.Load(); used != 0 {
		t.Fatalf("%d bytes still reserved after the requests ended", used)
	}
}
