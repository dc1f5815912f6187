package heartbeat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"github.com/batchclaim/batchclaim/httpguard"
	"github.com/batchclaim/batchclaim/pgdb"
)

// MaxBodyDefault bounds a heartbeat request's body.
const MaxBodyDefault = 64 << 10

// Handler serves POST /heartbeat (mount it on that path): it stores the heartbeat in the
// request body with Record and answers 200 with the Receipt as JSON. The body is either the
// ONAP VES heartbeat event, whose commonEventHeader has sourceName, eventName and
// lastEpochMicrosec:
//
//	{"event": {"commonEventHeader": {"sourceName": "vnf-1", "eventName": "Heartbeat_vDNS", "lastEpochMicrosec": 1700000000000000, ...}}}
//
// or those three fields alone at the top level. Errors are JSON {"error": "..."}: 400 for
// a body that is not such JSON or lacks a field, 405 for another method, 413 for a body over
// MaxBodyDefault, 422 for an eventName that is not configured (the heartbeat is discarded),
// 500 when the database fails (logged through a throttle: a line, then a count every 10s
// while it goes on, however many sources beat). q is the pgdb.DB of the instances;
// Service.Handler passes its own.
func Handler(q pgdb.Querier, logger *slog.Logger) http.Handler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	quiet := httpguard.NewThrottle(logger, httpguard.LogIntervalDefault)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			writeError(w, http.StatusMethodNotAllowed, "use POST with a JSON heartbeat event")
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyDefault))
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body over %d bytes", tooBig.Limit))
				return
			}
			writeError(w, http.StatusBadRequest, "read body: "+err.Error())
			return
		}
		hb, err := decodeHeartbeat(body)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		rec, err := Record(r.Context(), q, hb)
		switch {
		case errors.Is(err, ErrUnknownEventName):
			writeError(w, http.StatusUnprocessableEntity, fmt.Sprintf("eventName %q is not a configured event type: heartbeat discarded", hb.EventName))
			return
		case err != nil:
			quiet.Log(r.Context(), slog.LevelError, "store heartbeat", "event_name", hb.EventName, "source_name", hb.SourceName, "err", err)
			writeError(w, http.StatusInternalServerError, "could not store the heartbeat")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(rec)
	})
}

// vesEnvelope is the part of an ONAP VES event the handler reads.
type vesEnvelope struct {
	Event *struct {
		CommonEventHeader *Heartbeat `json:"commonEventHeader"`
	} `json:"event"`
}

// decodeHeartbeat reads a VES heartbeat event or the flat form, and validates it.
func decodeHeartbeat(body []byte) (Heartbeat, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return Heartbeat{}, errors.New("empty body: want a JSON heartbeat event")
	}
	var env vesEnvelope
	if err := json.Unmarshal(body, &env); err != nil {
		return Heartbeat{}, fmt.Errorf("body is not valid JSON: %v", err)
	}
	var hb Heartbeat
	switch {
	case env.Event != nil && env.Event.CommonEventHeader != nil:
		hb = *env.Event.CommonEventHeader
	case env.Event != nil:
		return Heartbeat{}, errors.New(`"event" has no "commonEventHeader"`)
	default:
		if err := json.Unmarshal(body, &hb); err != nil {
			return Heartbeat{}, fmt.Errorf("body is not a heartbeat: %v", err)
		}
	}
	if err := hb.Validate(); err != nil {
		return Heartbeat{}, err
	}
	return hb, nil
}

func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
