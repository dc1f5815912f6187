package dlt

import (
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// FakeBatch builds a deterministic, syntactically valid batch for tests and demos and returns
// its id and a BatchList holding only it. The header is the text "service=<serviceID>;n=<n>",
// the id is the hex SHA-512 of the header, and the batch holds one transaction whose id is the
// hex SHA-512 of "txn;" followed by the header. The same arguments always give the same bytes.
func FakeBatch(serviceID string, n int) (id string, list []byte) {
	header := []byte(fmt.Sprintf("service=%s;n=%d", serviceID, n))
	id = hexSHA512(header)

	txnHeader := append([]byte("txn;"), header...)
	var txn []byte
	txn = protowire.AppendTag(txn, fieldTxnHeader, protowire.BytesType)
	txn = protowire.AppendBytes(txn, txnHeader)
	txn = protowire.AppendTag(txn, fieldTxnHeaderSig, protowire.BytesType)
	txn = protowire.AppendString(txn, hexSHA512(txnHeader))
	txn = protowire.AppendTag(txn, fieldTxnPayload, protowire.BytesType)
	txn = protowire.AppendBytes(txn, []byte(strconv.Itoa(n)))

	var batch []byte
	batch = protowire.AppendTag(batch, fieldBatchHeader, protowire.BytesType)
	batch = protowire.AppendBytes(batch, header)
	batch = protowire.AppendTag(batch, fieldBatchHeaderSig, protowire.BytesType)
	batch = protowire.AppendString(batch, id)
	batch = protowire.AppendTag(batch, fieldBatchTransactions, protowire.BytesType)
	batch = protowire.AppendBytes(batch, txn)
	return id, NewBatchList(batch)
}

// FakeBatchService reads back the service id and number FakeBatch put into a batch header.
// ok is false for any other header.
func FakeBatchService(header []byte) (serviceID string, n int, ok bool) {
	s, found := strings.CutPrefix(string(header), "service=")
	if !found {
		return "", 0, false
	}
	i := strings.LastIndex(s, ";n=")
	if i < 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(s[i+len(";n="):])
	if err != nil {
		return "", 0, false
	}
	return s[:i], n, true
}

func hexSHA512(b []byte) string {
	sum := sha512.Sum512(b)
	return hex.EncodeToString(sum[:])
}
