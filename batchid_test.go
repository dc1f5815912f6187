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
		{"combining mark", "e\u0301", ""},
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
