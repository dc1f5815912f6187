package dltsim

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/httpguard"
)

// scabbardAPI speaks the Splinter scabbard REST API.
type scabbardAPI struct{ s *Sim }

func (a scabbardAPI) prefix() string {
	return "/scabbard/" + a.s.cfg.Circuit + "/" + a.s.cfg.Service
}

func (a scabbardAPI) routes(mux *http.ServeMux) {
	mux.Handle("POST "+a.prefix()+"/batches", a.s.handlePost(a))
	mux.HandleFunc("GET "+a.prefix()+"/batch_statuses", a.statuses)
}

func (scabbardAPI) checkPost(r *http.Request) *apiError {
	if e := checkProtocolVersion(r); e != nil {
		return e
	}
	if r.Header.Get("Content-Type") != "application/octet-stream" {
		return &apiError{status: 400, message: "Invalid content type: expected application/octet-stream"}
	}
	return nil
}

// checkProtocolVersion: an optional SplinterProtocolVersion header must be 1.
func checkProtocolVersion(r *http.Request) *apiError {
	v, ok := r.Header["Splinterprotocolversion"]
	if !ok || (len(v) == 1 && v[0] == "1") {
		return nil
	}
	return &apiError{status: 400, message: "Unsupported SplinterProtocolVersion: " + strings.Join(v, ",")}
}

func (scabbardAPI) badList(err error) *apiError {
	if batchListErrorKind(err) == dlt.ErrEmptyBatchList {
		return &apiError{status: 400, message: "No valid batches provided"}
	}
	return &apiError{status: 400, message: "Invalid body: not a valid list of batches"}
}

func (scabbardAPI) fault(status int) *apiError {
	if status == http.StatusInternalServerError {
		return &apiError{status: status, message: "The server encountered an error"}
	}
	return &apiError{status: status, message: http.StatusText(status)}
}

func (scabbardAPI) writeError(w http.ResponseWriter, e *apiError) {
	if e.status == http.StatusTooManyRequests {
		w.WriteHeader(e.status)
		return
	}
	writeJSON(w, e.status, map[string]string{"code": strconv.Itoa(e.status), "message": e.message})
}

func (a scabbardAPI) writeAccepted(w http.ResponseWriter, _ *http.Request, ids []string) {
	link := a.prefix() + "/batch_statuses?ids=" + strings.Join(ids, ",")
	writeJSON(w, http.StatusAccepted, map[string]string{"link": link})
}

// statuses serves GET .../batch_statuses?ids=...
func (a scabbardAPI) statuses(w http.ResponseWriter, r *http.Request) {
	e := a.s.checkAuth(r)
	if e == nil {
		e = checkProtocolVersion(r)
	}
	if e != nil {
		a.writeError(w, e)
		return
	}
	var ids []string
	for id := range strings.SplitSeq(r.URL.Query().Get("ids"), ",") {
		if id != "" {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		a.writeError(w, &apiError{status: 400, message: "No batch IDs specified"})
		return
	}
	wait := parseWait(r)
	_ = httpguard.ExtendWriteDeadline(w, r, wait) // a long poll answers after its wait, not within the listener's write timeout
	views := a.s.waitFor(r.Context(), ids, wait, scabbardWaitCheckInterval,
		func(st batchclaim.Status) bool {
			return st == batchclaim.StatusCommitted || st == batchclaim.StatusInvalid
		})
	ans := make([]map[string]any, len(views))
	for i, v := range views {
		ans[i] = scabbardEntry(v)
	}
	writeJSON(w, http.StatusOK, ans)
}

var scabbardStatusTypes = map[batchclaim.Status]string{
	batchclaim.StatusUnknown:   "Unknown",
	batchclaim.StatusPending:   "Pending",
	batchclaim.StatusInvalid:   "Invalid",
	batchclaim.StatusValid:     "Valid",
	batchclaim.StatusCommitted: "Committed",
}

func scabbardEntry(v view) map[string]any {
	msgs := []map[string]any{}
	switch v.status {
	case batchclaim.StatusValid, batchclaim.StatusCommitted:
		for _, tx := range v.txIDs {
			msgs = append(msgs, map[string]any{"transaction_id": tx})
		}
	case batchclaim.StatusInvalid:
		data := make([]int, len(invalidData)) // serde writes Vec<u8> as an array of numbers
		for i := range len(invalidData) {
			data[i] = int(invalidData[i])
		}
		for _, tx := range v.txIDs {
			msgs = append(msgs, map[string]any{
				"transaction_id": tx, "error_message": invalidMessage, "error_data": data,
			})
		}
	}
	return map[string]any{
		"id":     v.id,
		"status": map[string]any{"statusType": scabbardStatusTypes[v.status], "message": msgs},
		"timestamp": map[string]int64{
			"secs_since_epoch":  v.updated.Unix(),
			"nanos_since_epoch": int64(v.updated.Nanosecond()),
		},
	}
}
