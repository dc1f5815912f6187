package batchclaim

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
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
// they are, and two ids that look the same are the same bytes. A service_id is 1 to
// MaxServiceIDLen bytes of valid UTF-8, in Unicode Normalization Form C (NFC), whose
// characters all print something:
//
//   - no space of any kind (Zs, Zl, Zp) and no control character (C0, DEL, C1:
//     U+0000-U+001F, U+007F-U+009F);
//   - no format character (category Cf: zero-width spaces and joiners U+200B-U+200F,
//     bidirectional overrides and isolates U+202A-U+202E and U+2066-U+2069, the byte order
//     mark U+FEFF, the soft hyphen...) and no other Default_Ignorable_Code_Point: the
//     combining grapheme joiner U+034F, the Hangul fillers U+115F, U+1160, U+3164 and U+FFA0,
//     the Khmer inherent vowels U+17B4-U+17B5, the variation selectors (U+180B-U+180D,
//     U+180F, U+FE00-U+FE0F, U+E0100-U+E01EF) and the rest of Unicode's list;
//   - no character that prints as a blank though it is not one by category (the Braille
//     pattern blank U+2800);
//   - no private-use, replacement (U+FFFD), unassigned or non-character code point.
//
// Such characters would let a name look like another, or inject escape sequences into a
// terminal that prints it. An id not in NFC (an "á" written as "a" and a combining accent,
// which NFC writes as one code point) is refused, not normalized: the client learns that
// the id it sends is not the one it would read back. The error quotes the offending
// characters as escapes, never raw.
func ValidateServiceID(s string) error {
	switch {
	case s == "":
		return fmt.Errorf("service_id is empty")
	case len(s) > MaxServiceIDLen:
		return fmt.Errorf("service_id is %d bytes; at most %d allowed", len(s), MaxServiceIDLen)
	}
	if visibleASCII(s) {
		return nil // no rune below is refused, and ASCII is in NFC
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
	if !norm.NFC.IsNormalString(s) {
		return notNFC(s)
	}
	return nil
}

// visibleASCII reports whether s is all visible ASCII (U+0021 to U+007E), the common case,
// checked without decoding runes or normalizing: an enqueue of many jobs checks every one.
func visibleASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f { // space, controls, DEL, non-ASCII
			return false
		}
	}
	return true
}

// notNFC names the first part of s that Normalization Form C writes otherwise.
func notNFC(s string) error {
	for i := 0; i < len(s); {
		n := norm.NFC.NextBoundaryInString(s[i:], true)
		if n <= 0 {
			break
		}
		if seg := s[i : i+n]; norm.NFC.String(seg) != seg {
			return fmt.Errorf("service_id is not in Unicode Normalization Form C (NFC): %s at byte %d is %s in NFC; send the id in NFC",
				codePoints(seg), i, codePoints(norm.NFC.String(seg)))
		}
		i += n
	}
	return errors.New("service_id is not in Unicode Normalization Form C (NFC); send the id in NFC")
}

// codePoints writes s as its code points: "U+0061 U+0301".
func codePoints(s string) string {
	var b strings.Builder
	for _, r := range s {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%U", r)
	}
	return b.String()
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
	case unicode.In(r, defaultIgnorable...):
		return "a default-ignorable character, which prints nothing"
	case unicode.Is(blank, r):
		return "a blank that is not a space by category"
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

// defaultIgnorable is, with category Cf (checked apart), Unicode's Default_Ignorable_Code_Point
// (DerivedCoreProperties.txt: Other_Default_Ignorable_Code_Point + Cf + Variation_Selector,
// less White_Space, U+FFF9-U+FFFB and the prepended concatenation marks, all of which the
// service_id rule refuses anyway as spaces or format characters).
var defaultIgnorable = []*unicode.RangeTable{unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector}

// blank holds graphic characters that print nothing, though neither their category nor
// Default_Ignorable_Code_Point says so.
var blank = &unicode.RangeTable{R16: []unicode.Range16{
	{Lo: 0x2800, Hi: 0x2800, Stride: 1}, // BRAILLE PATTERN BLANK
}}
