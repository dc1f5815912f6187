package ingest

import (
	"encoding/json"
	"net/http"
	"net/url"

	"github.com/batchclaim/batchclaim/httpguard"
)

// eachStatusLink calls yield with each link at which the statuses of n ids (id(i) is the
// i-th) can be asked for, in order, until yield returns false: one link for as many ids as
// fit MaxStatusIDs and MaxLinkLen, so that each of them works however many batches a list
// held. The scheme and host are Config.BaseURL's, else the request's checked Host; without
// either the links are relative to this server. link is one buffer, reused: it is valid only
// during yield, so that the links of a list of any length take the memory of one.
func (h *Handler) eachStatusLink(r *http.Request, n int, id func(int) string, yield func(link []byte) bool) {
	base := h.cfg.BaseURL
	if base == "" {
		if host, ok := httpguard.Host(r.Context()); ok && host != "" {
			scheme := "http"
			if r.TLS != nil {
				scheme = "https"
			}
			base = (&url.URL{Scheme: scheme, Host: host}).String()
		}
	}
	prefix := base + "/batch_statuses?id="
	var b []byte
	k := 0 // ids in b
	for i := range n {
		id := url.QueryEscape(id(i))
		if k > 0 && (k == MaxStatusIDs || len(b)+1+len(id) > MaxLinkLen) {
			if !yield(b) {
				return
			}
			b, k = b[:0], 0
		}
		if k == 0 {
			b = append(b, prefix...)
		} else {
			b = append(b, ',')
		}
		b = append(b, id...)
		k++
	}
	yield(b)
}

// firstStatusLink is the first link of eachStatusLink.
func (h *Handler) firstStatusLink(r *http.Request, ids []string) string {
	var first string
	h.eachStatusLink(r, len(ids), func(i int) string { return ids[i] }, func(link []byte) bool {
		first = string(link)
		return false
	})
	return first
}

// writeLinks writes the 202 answer to a POST /batches, {"link": first}, or
// {"link": first, "links": [every link, in order]} when the batches need more than one, as
// the links are made: the answer to a list of tens of thousands of batches, about as long as
// their ids, is never held whole.
func (h *Handler) writeLinks(w http.ResponseWriter, r *http.Request, stored []Stored) {
	httpguard.JSONHeader(w, http.StatusAccepted)
	var first []byte
	k := 0
	h.eachStatusLink(r, len(stored), func(i int) string { return stored[i].BatchID }, func(link []byte) bool {
		q, _ := json.Marshal(string(link)) // a string always encodes
		k++
		switch k {
		case 1:
			first = q
			_, _ = w.Write([]byte(`{"link":`))
			_, _ = w.Write(q)
		case 2:
			_, _ = w.Write([]byte(`,"links":[`))
			_, _ = w.Write(first)
			_, _ = w.Write([]byte(","))
			_, _ = w.Write(q)
		default:
			_, _ = w.Write([]byte(","))
			_, _ = w.Write(q)
		}
		return true
	})
	if k > 1 {
		_, _ = w.Write([]byte("]"))
	}
	_, _ = w.Write([]byte("}\n"))
}
