package dlt

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
)

// flexBytes decodes binary data the way either ledger writes it: Sawtooth sends a base64
// string, Splinter (serde) an array of numbers.
type flexBytes []byte

func (f *flexBytes) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*f = nil
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		d, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return fmt.Errorf("binary data: %w", err)
		}
		*f = d
		return nil
	}
	var nums []uint8
	if err := json.Unmarshal(b, &nums); err != nil {
		return fmt.Errorf("binary data is neither base64 nor an array of bytes: %w", err)
	}
	*f = nums
	return nil
}
