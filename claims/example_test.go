package claims_test

import (
	"fmt"
	"time"

	"github.com/batchclaim/batchclaim/claims"
)

// Knobs left unset follow from the ones set; Resolve shows the timings an Engine would use
// and checks every rule.
func ExampleConfig_Resolve() {
	t, err := claims.Config{
		RenewInterval: 500 * time.Millisecond,
		Expiry1:       3 * time.Second,
		Expiry2:       15 * time.Second,
	}.Resolve()
	fmt.Println(err)
	fmt.Println("local deadline:", t.LocalDeadline)
	fmt.Println("max submission:", t.MaxSubmission)

	_, err = claims.Config{RenewInterval: 2 * time.Second, Expiry1: 3 * time.Second}.Resolve()
	fmt.Println(err)
	// Output:
	// <nil>
	// local deadline: 2s
	// max submission: 12.7s
	// invalid claim timings: renew interval R <= T1/3 violated: R = 2s, T1 = 3s (T1/3 = 1s)
	// local deadline D >= 2R violated: D = 2s, R = 2s (2R = 4s). Not set, so from the defaults: D = 2/3 of T1 = 2s. You set Expiry1 = 3s, RenewInterval = 2s: change them, or also set LocalDeadline
}
