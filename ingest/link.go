package ingest

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/batchclaim/batchclaim/httpguard"
)

// statusLinks returns the links at which the statuses of ids can be asked for, in order:
// one link for as many ids as fit MaxStatusIDs and MaxLinkLen, so that each of them works
// however many batches a list held. The scheme and host are Config.BaseURL's, else the
// request's checked Host; without either the links are relative to this server.
func (h *Handler) statusLinks(r *http.Request, ids []string) []string {
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
	var links []string
	var b strings.Builder
	n := 0
	for _, id := range ids {
		id = url.QueryEscape(id)
		if n > 0 && (n == MaxStatusIDs || b.Len()+1+len(id) > MaxLinkLen) {
			links = append(links, b.String())
			b.Reset()
			n = 0
		}
		if n == 0 {
			b.WriteString(prefix)
		} else {
			b.WriteByte(',')
		}
		b.WriteString(id)
		n++
	}
	return append(links, b.String())
}
