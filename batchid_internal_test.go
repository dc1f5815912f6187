package batchclaim

import "testing"

// The ASCII shortcut of ValidateServiceID accepts exactly the ASCII characters the full check
// accepts.
func TestVisibleASCIIAgreesWithTheFullCheck(t *testing.T) {
	t.Parallel()
	for c := range rune(128) {
		s := "a" + string(c) + "b"
		if fast, full := visibleASCII(s), badServiceIDRune(c) == ""; fast != full {
			t.Errorf("%U: shortcut accepts %v, full check accepts %v", c, fast, full)
		}
	}
	if visibleASCII("é") {
		t.Error("the shortcut accepts a non-ASCII string")
	}
}
