package dltsim_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/dlt/dltsim"
)

// postBatches sends a BatchList the way a ledger client does and returns the answer, its body
// read and closed.
func postBatches(url string, list []byte) *http.Response {
	resp, err := http.Post(url, "application/octet-stream", bytes.NewReader(list))
	if err != nil {
		log.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp
}

// A client posts a batch to the simulated Sawtooth REST API and asks for its status. The
// simulator's clock is moved by hand: the batch is PENDING until CommitLatency has passed,
// then COMMITTED. Posting the same batch again is answered 202 and changes nothing.
func Example() {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var elapsed atomic.Int64 // how far the clock has been moved, in nanoseconds
	sim, err := dltsim.New(dltsim.Config{
		CommitLatency: time.Second,
		Now:           func() time.Time { return start.Add(time.Duration(elapsed.Load())) },
	})
	if err != nil {
		log.Fatal(err)
	}
	defer sim.Close()
	base, err := sim.Listen() // a free loopback port
	if err != nil {
		log.Fatal(err)
	}

	status := func(id string) string {
		resp, err := http.Get(base + "/batch_statuses?id=" + id)
		if err != nil {
			log.Fatal(err)
		}
		defer resp.Body.Close()
		var answer struct {
			Data []struct {
				Status string `json:"status"`
			} `json:"data"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
			log.Fatal(err)
		}
		return answer.Data[0].Status
	}

	id, list := dlt.FakeBatch("order-42", 1)
	fmt.Println("POST:", postBatches(base+"/batches", list).StatusCode)
	fmt.Println("status:", status(id))
	elapsed.Add(int64(time.Second))
	fmt.Println("status 1s later:", status(id))
	fmt.Println("POST again:", postBatches(base+"/batches", list).StatusCode)

	for _, p := range sim.Posts() {
		fmt.Println("recorded:", p.Seq, p.Service, p.HTTPStatus, p.Effect)
	}
	fmt.Println("on the chain:", len(sim.Committed()), sim.Committed()[0] == id)
	// Output:
	// POST: 202
	// status: PENDING
	// status 1s later: COMMITTED
	// POST again: 202
	// recorded: 1 order-42 202 accepted
	// recorded: 2 order-42 202 duplicate
	// on the chain: 1 true
}

// An injected status makes the next POST fail without accepting its batch, with the
// Retry-After header and the error body the real API sends; the client's retry is accepted.
func ExampleSim_InjectStatus() {
	sim, err := dltsim.New(dltsim.Config{RetryAfter: 1500 * time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	defer sim.Close()
	base, err := sim.Listen()
	if err != nil {
		log.Fatal(err)
	}

	sim.InjectStatus(http.StatusServiceUnavailable, 1)
	_, list := dlt.FakeBatch("order-42", 1)
	resp, err := http.Post(base+"/batches", "application/octet-stream", bytes.NewReader(list))
	if err != nil {
		log.Fatal(err)
	}
	var body struct {
		Error struct {
			Code  int    `json:"code"`
			Title string `json:"title"`
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		log.Fatal(err)
	}
	_ = resp.Body.Close()
	fmt.Println("POST:", resp.StatusCode, "Retry-After:", resp.Header.Get("Retry-After"))
	fmt.Println("error:", body.Error.Code, body.Error.Title)

	fmt.Println("retry:", postBatches(base+"/batches", list).StatusCode)
	for _, p := range sim.Posts() {
		fmt.Println("recorded:", p.Seq, p.HTTPStatus, p.Effect)
	}
	// Output:
	// POST: 503 Retry-After: 2
	// error: 15 Validator Not Ready
	// retry: 202
	// recorded: 1 503 rejected
	// recorded: 2 202 accepted
}

// A test in another process drives the simulator through its admin API under /_sim/. Here
// settling is paused so the queue fills: at QueueHigh queued batches every POST answers 429
// until a hand-made commit drains the queue below QueueLow.
func Example_adminAPI() {
	sim, err := dltsim.New(dltsim.Config{QueueHigh: 2, QueueLow: 1})
	if err != nil {
		log.Fatal(err)
	}
	defer sim.Close()
	base, err := sim.Listen()
	if err != nil {
		log.Fatal(err)
	}
	admin := func(method, path string) string {
		req, err := http.NewRequest(method, base+path, nil)
		if err != nil {
			log.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			log.Fatal(err)
		}
		return strings.TrimSpace(fmt.Sprintf("%d %s", resp.StatusCode, b))
	}

	fmt.Println("pause:", admin(http.MethodPost, "/_sim/pause?on=true"))
	for n := 1; n <= 3; n++ {
		_, list := dlt.FakeBatch("order-42", n)
		fmt.Printf("POST batch %d: %d\n", n, postBatches(base+"/batches", list).StatusCode)
	}
	fmt.Println("commit:", admin(http.MethodPost, "/_sim/commit?n=2"))
	_, list := dlt.FakeBatch("order-42", 3)
	fmt.Println("POST batch 3 again:", postBatches(base+"/batches", list).StatusCode)
	fmt.Println("queued:", sim.Queued(), "committed:", len(sim.Committed()))
	// Output:
	// pause: 204
	// POST batch 1: 202
	// POST batch 2: 202
	// POST batch 3: 429
	// commit: 200 {"committed":2}
	// POST batch 3 again: 202
	// queued: 1 committed: 2
}
