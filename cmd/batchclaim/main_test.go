package main

import (
	"fmt"
	"os"
	"testing"

	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/testbin"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

func TestMain(m *testing.M) {
	dbtest.Main(m)
	if err := testbin.Cleanup(); err != nil {
		fmt.Fprintln(os.Stderr, "remove the built program:", err)
	}
}
