package dlt_test

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/dlt"
)

// rawBatch encodes a Batch message with the given header and id and no transaction.
func rawBatch(header, id string) []byte {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendBytes(b, []byte(header))
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendString(b, id)
	b = protowire.AppendTag(b, 4, protowire.VarintType)
	b = protowire.AppendVarint(b, 1)
	return b
}

func TestFakeBatch(t *testing.T) {
	t.Parallel()
	id, list := dlt.FakeBatch("svc-a", 7)
	if !batchclaim.ValidBatchID(id) {
		t.Fatalf("id %q is not a valid batch id", id)
	}
	id2, list2 := dlt.FakeBatch("svc-a", 7)
	if id2 != id || !bytes.Equal(list, list2) {
		t.Fatal("FakeBatch is not deterministic")
	}
	if other, _ := dlt.FakeBatch("svc-a", 8); other == id {
		t.Fatal("different n gave the same id")
	}
	batches, err := dlt.SplitBatchList(list)
	if err != nil {
		t.Fatal(err)
	}
	if len(batches) != 1 || batches[0].ID != id || !bytes.Equal(batches[0].List, list) {
		t.Fatalf("split = %+v, want the one batch %s", batches, id)
	}
	if len(batches[0].TransactionIDs) != 1 || !batchclaim.ValidBatchID(batches[0].TransactionIDs[0]) {
		t.Fatalf("transaction ids = %q, want one valid id", batches[0].TransactionIDs)
	}
	svc, n, ok := dlt.FakeBatchService(batches[0].Header)
	if !ok || svc != "svc-a" || n != 7 {
		t.Fatalf("FakeBatchService = %q, %d, %v; want svc-a, 7, true", svc, n, ok)
	}
}

func TestFakeBatchService(t *testing.T) {
	t.Parallel()
	tests := []struct {
		header  string
		service string
		n       int
		ok      bool
	}{
		{"service=a;n=1", "a", 1, true},
		{"service=a;n=b;n=22", "a;n=b", 22, true},
		{"service=;n=0", "", 0, true},
		{"svc=a;n=1", "", 0, false},
		{"service=a", "", 0, false},
		{"service=a;n=x", "", 0, false},
		{"", "", 0, false},
	}
	for _, tt := range tests {
		svc, n, ok := dlt.FakeBatchService([]byte(tt.header))
		if svc != tt.service || n != tt.n || ok != tt.ok {
			t.Errorf("FakeBatchService(%q) = %q, %d, %v; want %q, %d, %v", tt.header, svc, n, ok, tt.service, tt.n, tt.ok)
		}
	}
}

func TestSplitBatchListConcatenated(t *testing.T) {
	t.Parallel()
	var all []byte
	var ids []string
	var lists [][]byte
	for i := range 3 {
		id, list := dlt.FakeBatch("svc", i)
		ids, lists = append(ids, id), append(lists, list)
		all = append(all, list...)
	}
	batches, err := dlt.SplitBatchList(all)
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range batches {
		if b.ID != ids[i] || !bytes.Equal(b.List, lists[i]) {
			t.Errorf("batch %d = %s, want %s with its own list", i, b.ID, ids[i])
		}
	}
	got, err := dlt.BatchIDs(all)
	if err != nil || !slices.Equal(got, ids) {
		t.Fatalf("BatchIDs = %v, %v; want %v", got, err, ids)
	}
}

func TestNewBatchList(t *testing.T) {
	t.Parallel()
	a, b := strings.Repeat("a", 128), strings.Repeat("b", 128)
	list := dlt.NewBatchList(rawBatch("h1", a), rawBatch("h2", b))
	batches, err := dlt.SplitBatchList(list)
	if err != nil {
		t.Fatal(err)
	}
	if len(batches) != 2 || batches[0].ID != a || batches[1].ID != b || string(batches[1].Header) != "h2" {
		t.Fatalf("split = %+v", batches)
	}
	if !bytes.Equal(batches[0].List, dlt.NewBatchList(rawBatch("h1", a))) {
		t.Fatal("List is not the one-batch list")
	}
	batches[1].Header[0] = 'x' // the header is part of the list, not a copy
	if !bytes.Equal(batches[1].List, dlt.NewBatchList(rawBatch("x2", b))) {
		t.Fatal("Header is not part of List")
	}
	if batches[0].List = append(batches[0].List, 0); !bytes.Equal(batches[1].List, dlt.NewBatchList(rawBatch("x2", b))) {
		t.Fatal("an append to one List changed the next one")
	}
}

// Without the transactions' ids a split gives the same batches.
func TestSplitBatchListNoTransactionIDs(t *testing.T) {
	t.Parallel()
	var all []byte
	for i := range 3 {
		_, list := dlt.FakeBatch("svc", i)
		all = append(all, list...)
	}
	want, err := dlt.SplitBatchList(all)
	if err != nil {
		t.Fatal(err)
	}
	got, err := dlt.SplitBatchListNoTransactionIDs(all)
	if err != nil || len(got) != len(want) {
		t.Fatalf("split = %d batches, %v; want %d", len(got), err, len(want))
	}
	for i, b := range got {
		w := want[i]
		if b.ID != w.ID || !bytes.Equal(b.List, w.List) || !bytes.Equal(b.Header, w.Header) || b.TransactionIDs != nil {
			t.Errorf("batch %d = %+v, want %+v without transaction ids", i, b, w)
		}
	}
}

// The reservation for a split counts only the batches it could decode: it stops at one too
// short to hold an id, so a body of empty batches reserves next to nothing.
func TestSplitBatchListMemory(t *testing.T) {
	t.Parallel()
	empties := bytes.Repeat(dlt.NewBatchList(nil), 1<<20)
	if got := dlt.SplitBatchListMemory(empties); got > 64<<10 {
		t.Fatalf("%d bytes of empty batches reserve %d bytes", len(empties), got)
	}
	// Each of the smallest batches costs more than its bytes: its id and bookkeeping.
	one := dlt.NewBatchList(rawBatch("", strings.Repeat("a", 128)))
	many := bytes.Repeat(one, 1000)
	if m1, m := dlt.SplitBatchListMemory(one), dlt.SplitBatchListMemory(many); m-m1 < 999*2*int64(len(one)) {
		t.Fatalf("1,000 of the smallest batches (%d bytes) reserve %d bytes, one %d", len(many), m, m1)
	}
}

func TestSplitBatchListErrors(t *testing.T) {
	t.Parallel()
	good := strings.Repeat("c", 128)
	unknownOnly := protowire.AppendVarint(protowire.AppendTag(nil, 5, protowire.VarintType), 3)
	wrongType := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 3)
	_, fake := dlt.FakeBatch("s", 1)
	// A transaction whose header signature is a varint.
	badTxn := protowire.AppendBytes(protowire.AppendTag(nil, 3, protowire.BytesType),
		protowire.AppendVarint(protowire.AppendTag(nil, 2, protowire.VarintType), 1))
	tests := []struct {
		name    string
		payload []byte
		want    error
		naming  string
	}{
		{"empty", nil, dlt.ErrEmptyBatchList, ""},
		{"no batch", unknownOnly, dlt.ErrEmptyBatchList, ""},
		{"garbage", []byte{0xff, 0xff, 0xff}, dlt.ErrBadBatchList, ""},
		{"truncated", fake[:len(fake)-3], dlt.ErrBadBatchList, ""},
		{"wrong wire type", wrongType, dlt.ErrBadBatchList, ""},
		{"upper-case id", dlt.NewBatchList(rawBatch("h", strings.ToUpper(good))), dlt.ErrInvalidBatch, strings.ToUpper(good)},
		{"short id", dlt.NewBatchList(rawBatch("h", "abc")), dlt.ErrInvalidBatch, `"abc"`},
		{"long id", dlt.NewBatchList(rawBatch("h", strings.Repeat("d", 300))), dlt.ErrInvalidBatch, `"` + strings.Repeat("d", 140) + `..."`},
		{"duplicate", dlt.NewBatchList(rawBatch("h", good), rawBatch("h2", good)), dlt.ErrInvalidBatch, good},
		{"duplicate before garbage", append(dlt.NewBatchList(rawBatch("h", good), rawBatch("h2", good)), 0xff), dlt.ErrInvalidBatch, good},
		{"bad transaction", dlt.NewBatchList(append(rawBatch("h", good), badTxn...)), dlt.ErrBadBatchList, "transaction field 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := dlt.SplitBatchList(tt.payload)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.naming) {
				t.Fatalf("err = %v, want it to name %s", err, tt.naming)
			}
			if _, err := dlt.BatchIDs(tt.payload); !errors.Is(err, tt.want) {
				t.Fatalf("BatchIDs err = %v, want %v", err, tt.want)
			}
			if _, lean := dlt.SplitBatchListNoTransactionIDs(tt.payload); lean == nil || lean.Error() != err.Error() {
				t.Fatalf("without transaction ids err = %v, want %v", lean, err)
			}
		})
	}
}
