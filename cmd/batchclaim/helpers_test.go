package main

import (
	"os"
	"testing"

	"github.com/batchclaim/batchclaim/dlt"
)

func fakeList(t *testing.T, svc string, n int) []byte {
	t.Helper()
	var list []byte
	for i := range n {
		_, l := dlt.FakeBatch(svc, i)
		list = append(list, l...) // concatenated BatchLists are one BatchList
	}
	return list
}

func writeFile(name string, b []byte) error { return os.WriteFile(name, b, 0o600) }
