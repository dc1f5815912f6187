package batchclaim

import "fmt"

// BatchIDLen is the length of a Sawtooth/Splinter batch id: a header signature written as
// 128 lowercase hex characters.
const BatchIDLen = 128

// ValidBatchID reports whether id is 128 lowercase hex characters.
func ValidBatchID(id string) bool {
	if len(id) != BatchIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// MaxServiceIDLen bounds a service_id; longer ones are rejected at ingest.
const MaxServiceIDLen = 256

// ValidateServiceID returns an error naming the problem with a service_id, or nil.
func ValidateServiceID(s string) error {
	switch {
	case s == "":
		return fmt.Errorf("service_id is empty")
	case len(s) > MaxServiceIDLen:
		return fmt.Errorf("service_id is %d bytes; at most %d allowed", len(s), MaxServiceIDLen)
	}
	for _, r := range s {
		if r < 0x21 || r == 0x7f {
			return fmt.Errorf("service_id %q contains a space or control character", s)
		}
	}
	return nil
}
