package dlt_test

import (
	"context"
	"fmt"
	"log"

	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/dlt/dltsim"
)

// Example posts a batch to a simulated scabbard service and reads its status.
func Example() {
	ctx := context.Background()
	sim, err := dltsim.New(dltsim.Config{Flavor: dlt.FlavorScabbard})
	if err != nil {
		log.Fatal(err)
	}
	defer sim.Close()
	node, err := sim.Listen()
	if err != nil {
		log.Fatal(err)
	}

	client, err := dlt.NewClient(dlt.Config{
		Flavor: dlt.FlavorScabbard, URL: node,
		Circuit: dltsim.CircuitDefault, Service: dltsim.ServiceDefault,
	})
	if err != nil {
		log.Fatal(err)
	}
	id, list := dlt.FakeBatch("service-a", 1)
	res, err := client.Post(ctx, list)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Verdict, res.HTTPStatus)

	sts, err := client.Statuses(ctx, []string{id})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(sts[0].Status)
	// Output:
	// accepted 202
	// COMMITTED
}
