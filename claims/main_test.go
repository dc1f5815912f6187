package claims_test

import (
	"testing"

	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }
