package batchclaim

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

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

// ValidateServiceID returns an error naming the problem with a service_id, or nil. Every path
// by which a service_id enters (the ingest API, the halts API, `batchclaim enqueue`,
// ingest.Enqueue) checks it here, so that the database holds only ids that print as what
// they are. A service_id is 1 to MaxServiceIDLen bytes of valid UTF-8 whose characters are all
// visible: no space of any kind, no control character (C0, DEL, C1: U+0000-U+001F,
// U+007F-U+009F), no format or invisible character (Unicode category Cf: zero-width spaces
// and joiners U+200B-U+200F, bidirectional overrides and isolates U+202A-U+202E and
// U+2066-U+2069, the byte order mark U+FEFF, the soft hyphen...), no private-use,
// replacement (U+FFFD) or non-character code point. Such characters would let a name look
// like another, or inject escape sequences into a terminal that prints it. The error
// quotes the offending character as an escape, never raw.
func ValidateServiceID(s string) error {
	switch {
	case s == "":
		return fmt.Errorf("service_id is empty")
	case len(s) > MaxServiceIDLen:
		return fmt.Errorf("service_id is %d bytes; at most %d allowed", len(s), MaxServiceIDLen)
	}
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				return fmt.Errorf("service_id is not valid UTF-8 (byte %#02x at offset %d)", s[i], i)
			}
		}
		if what := badServiceIDRune(r); what != "" {
			return fmt.Errorf("service_id contains %U (%s) at byte %d; only visible characters are allowed", r, what, i)
		}
	}
	return nil
}

// badServiceIDRune names what is wrong with r in a service_id, or returns "".
func badServiceIDRune(r rune) string {
	switch {
	case r == ' ' || unicode.In(r, unicode.Zs, unicode.Zl, unicode.Zp):
		return "a space"
	case unicode.Is(unicode.Cc, r):
		return "a control character"
	case unicode.Is(unicode.Cf, r):
		return "an invisible format character"
	case unicode.Is(unicode.Co, r):
		return "a private-use character"
	case r == utf8.RuneError:
		return "the replacement character"
	case r&0xfffe == 0xfffe || (r >= 0xfdd0 && r <= 0xfdef):
		return "a non-character"
	case !unicode.IsGraphic(r):
		return "an unassigned or invisible character"
	}
	return ""
}
