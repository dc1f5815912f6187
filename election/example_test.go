package election_test

import (
	"fmt"
	"time"

	"github.com/batchclaim/batchclaim/election"
)

// The timeout must exceed twice the heartbeat interval; a knob left unset follows from the
// other. An Elector with these timings steps down T - I after the send of its last
// confirmed heartbeat.
func ExampleConfig_Resolve() {
	i, t, err := election.Config{Roles: []string{"scheduler"}, Timeout: 5 * time.Second}.Resolve()
	fmt.Println(i, t, err)
	fmt.Println("steps down after:", t-i)

	_, _, err = election.Config{Roles: []string{"scheduler", "broker"}, HeartbeatInterval: time.Second, Timeout: 2 * time.Second}.Resolve()
	fmt.Println(err)
	// Output:
	// 1s 5s <nil>
	// steps down after: 4s
	// invalid election config: timeout T > 2I violated: T = 2s, I = 1s (2I = 2s)
}
