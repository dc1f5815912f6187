package batchclaim_test

import (
	"strings"
	"testing"

	"github.com/batchclaim/batchclaim"
)

func TestValidateServiceID(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, id string
		want     string // a part of the error; "" means valid
	}{
		{"plain", "svc-001", ""},
		{"letters of any script", "сервис-ñ-東京", ""},
		{"punctuation and symbols", "a/b:c@d#e€", ""},
		{"combining mark NFC keeps apart", "x\u0301", ""},
		{"NFC a with acute", "\u00e1", ""},
		{"Hangul syllables", "\ud55c\uae00", ""},
		{"emoji without a variation selector", "svc-\u2764", ""},
		{"longest", strings.Repeat("x", batchclaim.MaxServiceIDLen), ""},
		{"empty", "", "empty"},
		{"too long", strings.Repeat("x", batchclaim.MaxServiceIDLen+1), "at most 256"},
		{"invalid UTF-8", "\xff\xfe", "not valid UTF-8 (byte 0xff at offset 0)"},
		{"truncated UTF-8", "svc\xe2\x80", "not valid UTF-8"},
		{"NUL", "svc\x00", "U+0000 (a control character)"},
		{"escape", "svc\x1b[31m", "U+001B (a control character)"},
		{"DEL", "svc\x7f", "U+007F (a control character)"},
		{"C1 CSI", "svc\u009b31m", "U+009B (a control character)"},
		{"space", "svc 1", "U+0020 (a space)"},
		{"no-break space", "svc\u00a01", "U+00A0 (a space)"},
		{"ideographic space", "svc\u30001", "U+3000 (a space)"},
		{"line separator", "svc\u2028", "U+2028 (a space)"},
		{"zero-width space", "svc\u200b", "U+200B (an invisible format character)"},
		{"right-to-left mark", "svc\u200f", "U+200F (an invisible format character)"},
		{"right-to-left override", "svc\u202egpj.exe", "U+202E (an invisible format character)"},
		{"first isolate", "svc\u2068", "U+2068 (an invisible format character)"},
		{"byte order mark", "\ufeffsvc", "U+FEFF (an invisible format character)"},
		{"soft hyphen", "s\u00advc", "U+00AD (an invisible format character)"},
		{"tag character", "svc\U000e0041", "U+E0041 (an invisible format character)"},
		{"private use", "svc\ue000", "U+E000 (a private-use character)"},
		{"replacement character", "svc\ufffd", "U+FFFD (the replacement character)"},
		{"non-character", "svc\ufdd0", "U+FDD0 (a non-character)"},
		{"unassigned", "svc\U0003ffff", "a non-character"},
		// Default_Ignorable_Code_Point outside category Cf, and blanks by look.
		{"combining grapheme joiner", "svc\u034f", "U+034F (a default-ignorable character"},
		{"Hangul choseong filler", "svc\u115f", "U+115F (a default-ignorable character"},
		{"Hangul filler", "svc\u3164", "U+3164 (a default-ignorable character"},
		{"halfwidth Hangul filler", "svc\uffa0", "U+FFA0 (a default-ignorable character"},
		{"variation selector 16", "svc\u2764\ufe0f", "U+FE0F (a default-ignorable character"},
		{"Mongolian free variation selector", "svc\u180b", "U+180B (a default-ignorable character"},
		{"Khmer inherent vowel", "svc\u17b4", "U+17B4 (a default-ignorable character"},
		{"variation selector supplement", "svc\U000e0100", "U+E0100 (a default-ignorable character"},
		{"Braille pattern blank", "svc\u2800", "U+2800 (a blank that is not a space by category)"},
		// NFC: one spelling per id.
		{"NFD a with acute", "a\u0301", "not in Unicode Normalization Form C (NFC): U+0061 U+0301 at byte 0 is U+00E1 in NFC"},
		{"NFD later in the id", "svc-e\u0301", "U+0065 U+0301 at byte 4 is U+00E9 in NFC"},
		{"a singleton NFC replaces", "svc\u212b", "U+212B at byte 3 is U+00C5 in NFC"},
		{"combining marks out of order", "a\u0323\u0302", "is U+1EAD in NFC"},
	} {
		err := batchclaim.ValidateServiceID(tt.id)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v, want valid", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: %v, want an error with %q", tt.name, err, tt.want)
		case err != nil && !printable(err.Error()):
			t.Errorf("%s: the error %q holds a character that is not printable ASCII", tt.name, err)
		}
	}
}

// printable reports whether s is printable ASCII only, so that it cannot carry what it
// refuses into a log or a terminal.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
