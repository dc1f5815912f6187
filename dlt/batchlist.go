package dlt

import (
	"errors"
	"fmt"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/batchclaim/batchclaim"
)

// Errors returned by SplitBatchList, SplitBatchListNoTransactionIDs and BatchIDs; check them with errors.Is.
var (
	// ErrEmptyBatchList reports an empty payload or a BatchList that holds no batch.
	ErrEmptyBatchList = errors.New("empty batch list")
	// ErrBadBatchList reports a payload that is not a decodable BatchList.
	ErrBadBatchList = errors.New("undecodable batch list")
	// ErrInvalidBatch reports a decodable batch that no ledger would accept: its id is not
	// 128 lowercase hex characters, or it appears twice in one list.
	ErrInvalidBatch = errors.New("invalid batch")
)

// Protobuf field numbers of the messages walked here.
const (
	fieldBatchListBatches  = 1
	fieldBatchHeader       = 1
	fieldBatchHeaderSig    = 2
	fieldBatchTransactions = 3
	fieldBatchTrace        = 4
	fieldTxnHeader         = 1
	fieldTxnHeaderSig      = 2
	fieldTxnPayload        = 3
)

// Batch is one batch of a BatchList.
type Batch struct {
	// ID is the batch's header signature.
	ID string
	// List is a serialized BatchList holding only this batch. The Lists of one split share
	// one buffer, so keeping one keeps them all; each is capped at its own length, so an
	// append to one copies it.
	List []byte
	// Header is the batch's serialized header. It is part of List, not a copy: a change to
	// one is a change to the other.
	Header []byte
	// TransactionIDs are the header signatures of its transactions, in order; nil from
	// SplitBatchListNoTransactionIDs.
	TransactionIDs []string
}

// SplitBatchList decodes a serialized BatchList and returns its batches in order, each
// re-wrapped in a BatchList of its own.
func SplitBatchList(payload []byte) ([]Batch, error) { return split(payload, true) }

// SplitBatchListNoTransactionIDs is SplitBatchList without the TransactionIDs, for callers
// that need only each batch's ID and List: the transactions are read and checked the same
// way, so it refuses the same payloads with the same errors, but their ids are not copied.
// It allocates at most SplitBatchListMemory(payload) bytes, whatever payload holds.
func SplitBatchListNoTransactionIDs(payload []byte) ([]Batch, error) {
	return split(payload, false)
}

// Costs of SplitBatchListNoTransactionIDs, for SplitBatchListMemory.
const (
	// batchCost is what one batch costs beyond its List and its Batch in the result: its ID
	// string and its entry in the duplicate check. That map is sized up front, and the
	// runtime rounds its tables up to powers of two at a 7/8 load: at most about 2.3 slots
	// an entry, each 24 bytes and a control byte in groups rounded to a size class, 61 bytes
	// in all, counted as 80.
	batchCost = batchclaim.BatchIDLen + 80
	// splitFixed covers what a split allocates once: the duplicate check's map itself (a
	// small one is a header and a group of 8 slots) and an error's message.
	splitFixed = 2 << 10
	// minBatchLen is the smallest encoding of a Batch that can be valid: its header
	// signature alone (tag, length, 128 characters). The split stops at a shorter one, and a
	// list of such batches has at most len/(minBatchLen+3) of them.
	minBatchLen = 1 + 2 + batchclaim.BatchIDLen
)

// SplitBatchListMemory returns a bound on the heap bytes SplitBatchListNoTransactionIDs
// allocates to decode payload, so that a caller can reserve them before it starts: the
// Lists' shared buffer (at most len(payload)) and, per batch, its ID, its place in the result
// and its entry in the duplicate check, about 300 bytes. It reads only the top level of
// payload and allocates nothing. The bound is largest, about 3.2 x len(payload), for a list
// of the smallest batches (134 bytes each: a header signature alone).
func SplitBatchListMemory(payload []byte) int64 {
	s := measure(payload)
	n := int64(s.batches)
	return allocSize(int64(s.listBytes)) + allocSize(n*int64(unsafe.Sizeof(Batch{}))) + n*batchCost + splitFixed
}

// allocSize bounds what an allocation of n bytes takes once the runtime has rounded it up to
// a size class (at most a quarter and 8 bytes more) or, past 32 KiB, to 8 KiB pages.
func allocSize(n int64) int64 { return n + min(n/4+8, 8<<10) }

// shape is what the top level of a BatchList holds up to where split would stop at the
// latest: the number of batches, and the bytes of their one-batch lists.
type shape struct{ batches, listBytes int }

// errStop ends measure's walk early.
var errStop = errors.New("stop")

// measure returns payload's shape, allocating nothing. The one-batch lists take no more than
// their batches took in payload (their tag and length are the shortest encoding), so
// listBytes <= len(payload).
func measure(payload []byte) shape {
	var s shape
	_ = walk(payload, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num != fieldBatchListBatches {
			return nil
		}
		if typ != protowire.BytesType || len(v) < minBatchLen {
			return errStop // split refuses this batch, and reads no further
		}
		s.batches++
		s.listBytes += protowire.SizeTag(fieldBatchListBatches) + protowire.SizeBytes(len(v))
		return nil
	})
	return s
}

// split is SplitBatchList, with the transactions' ids only if txIDs. Everything it keeps is
// allocated once at its final size (see SplitBatchListMemory), from measure's shape.
func split(payload []byte, txIDs bool) ([]Batch, error) {
	if len(payload) == 0 {
		return nil, ErrEmptyBatchList
	}
	s := measure(payload)
	lists := make([]byte, 0, s.listBytes)
	batches := make([]Batch, 0, s.batches)
	seen := make(map[string]struct{}, s.batches)
	err := walk(payload, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num != fieldBatchListBatches {
			return nil
		}
		if typ != protowire.BytesType {
			return fmt.Errorf("%w: field 1 has wire type %d", ErrBadBatchList, typ)
		}
		b, id, err := parseBatch(v, txIDs)
		if err != nil {
			return fmt.Errorf("batch %d: %w", len(batches), err)
		}
		if len(id) == batchclaim.BatchIDLen { // a longer bogus id is refused without a copy
			b.ID = string(id)
		}
		if !batchclaim.ValidBatchID(b.ID) {
			return fmt.Errorf("%w: batch %d has id %q: not 128 lowercase hex characters",
				ErrInvalidBatch, len(batches), excerpt(id, 140))
		}
		if _, dup := seen[b.ID]; dup {
			return fmt.Errorf("%w: batch id %s appears twice", ErrInvalidBatch, b.ID)
		}
		seen[b.ID] = struct{}{}
		// Only a batch that passed is copied: measure counted every batch up to the first one
		// split refuses, so the buffer never grows (a growth would copy every list before it).
		start := len(lists)
		lists = protowire.AppendTag(lists, fieldBatchListBatches, protowire.BytesType)
		lists = protowire.AppendBytes(lists, v)
		b.List = lists[start:len(lists):len(lists)]
		// The header, read from payload, moves to the same place in the batch's copy.
		if b.Header != nil {
			off := int(uintptr(unsafe.Pointer(unsafe.SliceData(b.Header))) - uintptr(unsafe.Pointer(unsafe.SliceData(v))))
			inner := b.List[len(b.List)-len(v):]
			b.Header = inner[off : off+len(b.Header) : off+len(b.Header)]
		}
		batches = append(batches, b)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(batches) == 0 {
		return nil, fmt.Errorf("%w: no batch in %d bytes", ErrEmptyBatchList, len(payload))
	}
	return batches, nil
}

// BatchIDs returns the ids of the batches of a serialized BatchList, in order, with the
// checks of SplitBatchList.
func BatchIDs(payload []byte) ([]string, error) {
	batches, err := SplitBatchListNoTransactionIDs(payload)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(batches))
	for i, b := range batches {
		ids[i] = b.ID
	}
	return ids, nil
}

// NewBatchList wraps serialized Batch messages into a serialized BatchList.
func NewBatchList(batches ...[]byte) []byte {
	var out []byte
	for _, b := range batches {
		out = protowire.AppendTag(out, fieldBatchListBatches, protowire.BytesType)
		out = protowire.AppendBytes(out, b)
	}
	return out
}

// parseBatch reads the fields of a serialized Batch: its Header is part of msg, its id (the
// last header signature) is returned uncopied for the caller to check, and its transactions'
// ids are copied only if txIDs.
func parseBatch(msg []byte, txIDs bool) (b Batch, id []byte, err error) {
	err = walk(msg, func(num protowire.Number, typ protowire.Type, v []byte) error {
		switch {
		case num == fieldBatchHeader && typ == protowire.BytesType:
			b.Header = v
		case num == fieldBatchHeaderSig && typ == protowire.BytesType:
			id = v
		case num == fieldBatchTransactions && typ == protowire.BytesType:
			txID, err := transactionID(v)
			if err != nil {
				return err
			}
			if txIDs {
				b.TransactionIDs = append(b.TransactionIDs, string(txID))
			}
		case num == fieldBatchTrace && typ == protowire.VarintType:
		case num >= fieldBatchHeader && num <= fieldBatchTrace:
			return fmt.Errorf("%w: batch field %d has wire type %d", ErrBadBatchList, num, typ)
		}
		return nil
	})
	return b, id, err
}

// transactionID returns the header signature of a serialized Transaction, part of msg.
func transactionID(msg []byte) ([]byte, error) {
	var id []byte
	err := walk(msg, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num == fieldTxnHeaderSig {
			if typ != protowire.BytesType {
				return fmt.Errorf("%w: transaction field 2 has wire type %d", ErrBadBatchList, typ)
			}
			id = v
		}
		return nil
	})
	return id, err
}

// walk calls fn for every field of a serialized message. For length-delimited fields v is
// the content; for others it is nil.
func walk(msg []byte, fn func(num protowire.Number, typ protowire.Type, v []byte) error) error {
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return fmt.Errorf("%w: %v", ErrBadBatchList, protowire.ParseError(n))
		}
		msg = msg[n:]
		var v []byte
		if typ == protowire.BytesType {
			v, n = protowire.ConsumeBytes(msg)
		} else {
			n = protowire.ConsumeFieldValue(num, typ, msg)
		}
		if n < 0 {
			return fmt.Errorf("%w: field %d: %v", ErrBadBatchList, num, protowire.ParseError(n))
		}
		msg = msg[n:]
		if err := fn(num, typ, v); err != nil {
			return err
		}
	}
	return nil
}

// excerpt shortens s to at most n bytes for error messages.
func excerpt[S string | []byte](s S, n int) string {
	if len(s) <= n {
		return string(s)
	}
	return string(s[:n]) + "..."
}
