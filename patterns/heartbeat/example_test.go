package heartbeat_test

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/batchclaim/batchclaim/patterns/heartbeat"
)

// The configuration is a list of event types, as `batchclaim heartbeat event-types set`
// reads it: per eventName the interval between heartbeats, the number of consecutive misses
// that raises a control-loop event, and the policy fields every event carries.
func ExampleEventType() {
	var types []heartbeat.EventType
	err := json.Unmarshal([]byte(`[
		{"eventName": "Heartbeat_vDNS", "interval": "60s", "missedCount": 3,
		 "controlLoop": {"policyName": "vDNS", "closedLoopControlName": "ControlLoop-vDNS"}},
		{"eventName": "Heartbeat_vFW", "interval": "30s", "missedCount": 0}
	]`), &types)
	fmt.Println(err)
	for _, t := range types {
		fmt.Printf("%s: silent for %s raises; valid entry: %v\n", t.Name, time.Duration(t.MissedCount)*t.Interval, t.Validate())
	}
	// Output:
	// <nil>
	// Heartbeat_vDNS: silent for 3m0s raises; valid entry: <nil>
	// Heartbeat_vFW: silent for 0s raises; valid entry: event type "Heartbeat_vFW": missedCount 0: want at least 1
}

// POST /heartbeat takes the ONAP VES heartbeat event (or its three fields alone) and says
// clearly what is wrong with a body it cannot use, before touching the database.
func ExampleHandler() {
	h := heartbeat.Handler(nil, nil) // a real service passes its pool
	for _, body := range []string{
		`{"event": {"commonEventHeader": {"sourceName": "vnf-1", "eventName": "Heartbeat_vDNS"`,
		`{"event": {"commonEventHeader": {"sourceName": "vnf-1", "eventName": "Heartbeat_vDNS"}}}`,
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", "/heartbeat", strings.NewReader(body)))
		fmt.Print(rec.Code, " ", rec.Body.String())
	}
	// Output:
	// 400 {"error":"body is not valid JSON: unexpected end of JSON input"}
	// 400 {"error":"lastEpochMicrosec is 0: want the source's time in microseconds since the Unix epoch"}
}
