package main

import (
	"encoding/json"
	"io"
)

// writeSummary prints a demo's or a run's summary: one indented JSON object with asJSON,
// else the text print writes.
func writeSummary(w io.Writer, asJSON bool, v any, print func(io.Writer)) error {
	if !asJSON {
		print(w)
		return nil
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
