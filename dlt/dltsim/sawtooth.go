package dltsim

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/httpguard"
)

// Sawtooth REST API error codes.
const (
	codeUnknownValidatorError = 10
	codeValidatorNotReady     = 15
	codeSubmissionTimeout     = 19
	codeInvalidBatch          = 30
	codeQueueFull             = 31
	codeNoBatches             = 34
	codeBadProtobuf           = 35
	codeWrongContentType      = 42
	codeBadStatusRequest      = 43
	codeInvalidID             = 60
	codeNoID                  = 66
)

// sawtoothAPI speaks the Sawtooth REST API.
type sawtoothAPI struct{ s *Sim }

func (a sawtoothAPI) routes(mux *http.ServeMux) {
	mux.Handle("POST /batches", a.s.handlePost(a))
	mux.HandleFunc("GET /batch_statuses", a.statuses)
	mux.HandleFunc("POST /batch_statuses", a.statuses)
}

func (sawtoothAPI) checkPost(r *http.Request) *apiError {
	if r.Header.Get("Content-Type") != "application/octet-stream" {
		return &apiError{status: 400, code: codeWrongContentType, title: "Wrong Content Type",
			message: "Batches must be submitted as a BatchList protobuf binary, with a 'Content-Type' header of 'application/octet-stream'"}
	}
	return nil
}

func (sawtoothAPI) badList(err error) *apiError {
	switch batchListErrorKind(err) {
	case dlt.ErrEmptyBatchList:
		return &apiError{status: 400, code: codeNoBatches, title: "No Batches Submitted",
			message: "The protobuf BatchList you submitted was empty and contained no Batches."}
	case dlt.ErrInvalidBatch:
		return &apiError{status: 400, code: codeInvalidBatch, title: "Submitted Batches Invalid",
			message: "The submitted BatchList was rejected by the validator: " + err.Error()}
	}
	return &apiError{status: 400, code: codeBadProtobuf, title: "Protobuf Not Decodable",
		message: "The protobuf BatchList you submitted was malformed and could not be read."}
}

func (sawtoothAPI) fault(status int) *apiError {
	switch status {
	case http.StatusTooManyRequests:
		return &apiError{status: status, code: codeQueueFull, title: "Unable to Accept Batches",
			message: "The validator cannot currently accept more batches, due to a full queue. Please submit your request again."}
	case http.StatusServiceUnavailable:
		return &apiError{status: status, code: codeValidatorNotReady, title: "Validator Not Ready",
			message: "The validator has no genesis block, and is not yet ready to be queried."}
	case http.StatusRequestTimeout:
		return &apiError{status: status, code: codeSubmissionTimeout, title: "Submission Timeout",
			message: "The batches could not be sent to the validator before the send backoff was exhausted."}
	case http.StatusBadRequest:
		return &apiError{status: status, code: codeInvalidBatch, title: "Submitted Batches Invalid",
			message: "The submitted BatchList was rejected by the validator."}
	}
	return &apiError{status: status, code: codeUnknownValidatorError, title: "Unknown Validator Error",
		message: "An unknown error occurred with the validator while processing your request."}
}

func (sawtoothAPI) writeError(w http.ResponseWriter, e *apiError) {
	writeJSON(w, e.status, map[string]any{"error": map[string]any{
		"code": e.code, "title": e.title, "message": e.message,
	}})
}

func (sawtoothAPI) writeAccepted(w http.ResponseWriter, r *http.Request, ids []string) {
	writeJSON(w, http.StatusAccepted, map[string]string{"link": sawtoothLink(r, ids)})
}

func sawtoothLink(r *http.Request, ids []string) string {
	return "http://" + r.Host + "/batch_statuses?id=" + strings.Join(ids, ",")
}

// statuses serves GET /batch_statuses?id=... and POST /batch_statuses with a JSON array.
func (a sawtoothAPI) statuses(w http.ResponseWriter, r *http.Request) {
	if e := a.s.checkAuth(r); e != nil {
		a.writeError(w, e)
		return
	}
	ids, err := sawtoothStatusIDs(r)
	if err != nil {
		a.writeError(w, &apiError{status: 400, code: codeBadStatusRequest, title: "Bad Status Request",
			message: "Requests for batch statuses sent as a POST must have a JSON array of batch ids: " + err.Error()})
		return
	}
	if e := checkStatusIDs(ids); e != nil {
		a.writeError(w, e)
		return
	}
	wait := parseWait(r)
	_ = httpguard.ExtendWriteDeadline(w, r, wait) // a long poll answers after its wait, not within the listener's write timeout
	views := a.s.waitFor(r.Context(), ids, wait, sawtoothWaitCheckInterval,
		func(st batchclaim.Status) bool { return st != batchclaim.StatusPending })
	data := make([]map[string]any, len(views))
	for i, v := range views {
		data[i] = sawtoothEntry(v)
	}
	ans := map[string]any{"data": data}
	if r.Method == http.MethodGet {
		ans["link"] = sawtoothLink(r, ids)
	}
	writeJSON(w, http.StatusOK, ans)
}

func sawtoothStatusIDs(r *http.Request) ([]string, error) {
	if r.Method == http.MethodGet {
		var ids []string
		for _, p := range r.URL.Query()["id"] {
			for id := range strings.SplitSeq(p, ",") {
				if id != "" {
					ids = append(ids, id)
				}
			}
		}
		return ids, nil
	}
	var ids []string
	if err := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1<<20)).Decode(&ids); err != nil {
		return nil, errors.New("body is not a JSON array of strings")
	}
	return ids, nil
}

func checkStatusIDs(ids []string) *apiError {
	if len(ids) == 0 {
		return &apiError{status: 400, code: codeNoID, title: "Id Query Empty",
			message: "Requests for batch statuses must specify at least one batch id."}
	}
	for _, id := range ids {
		if !batchclaim.ValidBatchID(id) {
			return &apiError{status: 400, code: codeInvalidID, title: "Id Query Invalid",
				message: "Batch id " + id + " is not 128 hex characters."}
		}
	}
	return nil
}

func sawtoothEntry(v view) map[string]any {
	invalid := []map[string]any{}
	if v.status == batchclaim.StatusInvalid {
		for _, tx := range v.txIDs {
			invalid = append(invalid, map[string]any{
				"id": tx, "message": invalidMessage, "extended_data": []byte(invalidData),
			})
		}
	}
	return map[string]any{"id": v.id, "status": string(v.status), "invalid_transactions": invalid}
}

// Sawtooth REST API codes of the validator faults an injection may name.
const (
	codeValidatorTimedOut     = 17
	codeValidatorDisconnected = 18
)

// sawtoothErrorTitle is the title the REST API sends with an error code, else title.
func sawtoothErrorTitle(code int, title string) string {
	switch code {
	case codeValidatorNotReady:
		return "Validator Not Ready"
	case codeValidatorTimedOut:
		return "Validator Timed Out"
	case codeValidatorDisconnected:
		return "Validator Disconnected"
	case codeSubmissionTimeout:
		return "Submission Timeout"
	}
	return title
}

// sawtoothErrorMessage is the message the REST API sends with an error code, else message.
func sawtoothErrorMessage(code int, message string) string {
	switch code {
	case codeValidatorTimedOut:
		return "The request timed out while waiting for a response from the validator. It may or may not have been processed."
	case codeValidatorDisconnected:
		return "The validator disconnected before sending a response. Try your request again later."
	}
	return message
}
