package dlt

import (
	"bytes"
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/batchclaim/batchclaim"
)

// Errors returned by SplitBatchList and BatchIDs; check them with errors.Is.
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
	// List is a serialized BatchList holding only this batch.
	List []byte
	// Header is the batch's serialized header.
	Header []byte
	// TransactionIDs are the header signatures of its transactions, in order.
	TransactionIDs []string
}

// SplitBatchList decodes a serialized BatchList and returns its batches in order, each
// re-wrapped in a BatchList of its own.
func SplitBatchList(payload []byte) ([]Batch, error) {
	if len(payload) == 0 {
		return nil, ErrEmptyBatchList
	}
	var batches []Batch
	seen := make(map[string]bool)
	err := walk(payload, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num != fieldBatchListBatches {
			return nil
		}
		if typ != protowire.BytesType {
			return fmt.Errorf("%w: field 1 has wire type %d", ErrBadBatchList, typ)
		}
		b, err := parseBatch(v)
		if err != nil {
			return fmt.Errorf("batch %d: %w", len(batches), err)
		}
		if !batchclaim.ValidBatchID(b.ID) {
			return fmt.Errorf("%w: batch %d has id %q: not 128 lowercase hex characters",
				ErrInvalidBatch, len(batches), excerpt(b.ID, 140))
		}
		if seen[b.ID] {
			return fmt.Errorf("%w: batch id %s appears twice", ErrInvalidBatch, b.ID)
		}
		seen[b.ID] = true
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
	batches, err := SplitBatchList(payload)
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

// parseBatch reads the fields of a serialized Batch.
func parseBatch(msg []byte) (Batch, error) {
	b := Batch{List: NewBatchList(msg)}
	err := walk(msg, func(num protowire.Number, typ protowire.Type, v []byte) error {
		switch {
		case num == fieldBatchHeader && typ == protowire.BytesType:
			b.Header = bytes.Clone(v)
		case num == fieldBatchHeaderSig && typ == protowire.BytesType:
			b.ID = string(v)
		case num == fieldBatchTransactions && typ == protowire.BytesType:
			id, err := transactionID(v)
			if err != nil {
				return err
			}
			b.TransactionIDs = append(b.TransactionIDs, id)
		case num == fieldBatchTrace && typ == protowire.VarintType:
		case num >= fieldBatchHeader && num <= fieldBatchTrace:
			return fmt.Errorf("%w: batch field %d has wire type %d", ErrBadBatchList, num, typ)
		}
		return nil
	})
	return b, err
}

// transactionID returns the header signature of a serialized Transaction.
func transactionID(msg []byte) (string, error) {
	var id string
	err := walk(msg, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num == fieldTxnHeaderSig {
			if typ != protowire.BytesType {
				return fmt.Errorf("%w: transaction field 2 has wire type %d", ErrBadBatchList, typ)
			}
			id = string(v)
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
func excerpt(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
