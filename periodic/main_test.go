package periodic_test

import (
	"testing"

	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

func TestMain(m *testing.M) {
	if childURL() != "" {
		runChild() // an instance of TestLeaderKilledMidTick, in a process of its own
		return
	}
	dbtest.Main(m)
}
