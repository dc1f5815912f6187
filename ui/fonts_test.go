package ui_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The screenshot test's fonts. Text is most of a view's pixels, so the goldens hold only if
// every glyph comes from the same font file on every machine. Which font `system-ui`,
// `monospace` or a missing glyph's fallback resolves to depends on the fonts installed
// (with Debian's fonts-noto-mono, which ImageMagick's Ghostscript pulls in, `monospace` is
// Noto Sans Mono instead of DejaVu Sans Mono, and a batch id moves by a few pixels). The test
// pins them in two layers, both pointing at the same files in testdata/fonts (DejaVu Sans and
// DejaVu Sans Mono from Debian's fonts-dejavu-core; see its README and LICENSE):
//
//   - the page under test gets pinnedFontsCSS after its own stylesheet: web fonts served by
//     the fixture server, set as the family of the body, the form controls and the elements
//     the browser shows in monospace. Whatever the browser's font lookup, the page's text
//     is drawn from these files, and pinnedFontsScript reports their load state into the
//     DOM, where the test checks it.
//   - Chromium runs with FONTCONFIG_FILE naming a configuration (writeFontconfig) that lists
//     testdata/fonts and nothing else and maps every generic family there, so a glyph the web
//     fonts lack, or anything the stylesheet does not reach, cannot fall back to an installed
//     font either. It also fixes the rendering settings fontconfig hands out for every font,
//     web fonts included, which the machine's own configuration would otherwise choose
//     (Debian's hints slightly): without it 1.2-1.4% of each view's pixels differ.
//
// The shipped page (ui/assets) knows nothing of this: it is served unchanged, with these
// files added only by the test's fixture server.

// fontsDir holds the pinned font files, relative to the package directory.
const fontsDir = "testdata/fonts"

// pinnedFaces are the web fonts of pinnedFontsCSS, one per file. Weight 600 (the page's
// table headers and tiles) selects the bold face; italic is synthesized from the regular one,
// the same way everywhere.
var pinnedFaces = []struct {
	family, file string
	weight       int
}{
	{"Pinned Sans", "DejaVuSans.ttf", 400},
	{"Pinned Sans", "DejaVuSans-Bold.ttf", 700},
	{"Pinned Mono", "DejaVuSansMono.ttf", 400},
	{"Pinned Mono", "DejaVuSansMono-Bold.ttf", 700},
}

// pinnedFontsCSS is the test-only stylesheet: the faces, and the families of everything the
// page shows text in. The body's family is inherited by every element that does not set its
// own; form controls and the monospace elements get theirs from the browser's stylesheet and
// are set here too.
func pinnedFontsCSS() string {
	var b strings.Builder
	for _, f := range pinnedFaces {
		fmt.Fprintf(&b, "@font-face { font-family: %q; src: url(\"/test/fonts/%s\") format(\"truetype\"); font-weight: %d; font-style: normal; }\n", f.family, f.file, f.weight)
	}
	b.WriteString(`body, input, button, select, textarea { font-family: "Pinned Sans" !important; }
code, pre, kbd, samp, tt { font-family: "Pinned Mono" !important; }
`)
	return b.String()
}

// pinnedFontsScript writes the state of the page's web fonts into <html data-fonts="...">
// every 250 ms of the page's time ("family weight status", comma separated), so the DOM that
// Chromium dumps at the end says whether the pinned faces loaded.
const pinnedFontsScript = `"use strict";
(function () {
  const report = () => {
    const faces = [];
    document.fonts.forEach((f) => faces.push(f.family.replace(/"/g, "") + " " + f.weight + " " + f.status));
    document.documentElement.dataset.fonts = faces.join(",");
  };
  report();
  setInterval(report, 250);
})();
`

// servePinnedFonts serves the stylesheet, the script and the font files under /test/.
func servePinnedFonts(mux *http.ServeMux) {
	mux.HandleFunc("GET /test/fonts.css", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
		_, _ = w.Write([]byte(pinnedFontsCSS()))
	})
	mux.HandleFunc("GET /test/fonts.js", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		_, _ = w.Write([]byte(pinnedFontsScript))
	})
	for _, f := range pinnedFaces {
		mux.HandleFunc("GET /test/fonts/"+f.file, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "font/ttf")
			http.ServeFile(w, r, filepath.Join(fontsDir, f.file))
		})
	}
}

// checkFontsLoaded fails the test unless the dumped DOM reports the regular sans face loaded
// and no face failed or still loading: else the screenshot would show some other font.
func checkFontsLoaded(t *testing.T, dom string) {
	t.Helper()
	const attr = `data-fonts="`
	i := strings.Index(dom, attr)
	if i < 0 {
		t.Fatalf("the page did not report its fonts (no %s...)", attr)
	}
	report := dom[i+len(attr):]
	report = report[:strings.IndexByte(report, '"')]
	if !strings.Contains(","+report+",", ",Pinned Sans 400 loaded,") ||
		strings.Contains(report, " error") || strings.Contains(report, " loading") {
		t.Fatalf("the pinned fonts did not all load: %q (want \"Pinned Sans 400 loaded\" and none in error or loading)", report)
	}
}

// writeFontconfig writes a fontconfig configuration that knows only the fonts in fontsDir,
// with every generic family mapped to them and fixed rendering settings, and returns its
// path for FONTCONFIG_FILE. It includes none of the system's configuration.
func writeFontconfig(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(fontsDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, pinnedFaces[0].file)); err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	alias := func(generic, family string) string {
		return fmt.Sprintf("  <alias binding=\"same\"><family>%s</family><prefer><family>%s</family></prefer></alias>\n", generic, family)
	}
	conf := `<?xml version="1.0"?>
<!DOCTYPE fontconfig SYSTEM "urn:fontconfig:fonts.dtd">
<fontconfig>
  <dir>` + dir + `</dir>
  <cachedir>` + filepath.Join(tmp, "cache") + `</cachedir>
` + alias("sans-serif", "DejaVu Sans") + alias("serif", "DejaVu Sans") + alias("system-ui", "DejaVu Sans") +
		alias("sans", "DejaVu Sans") + alias("monospace", "DejaVu Sans Mono") + alias("mono", "DejaVu Sans Mono") + `  <match target="pattern">
    <test qual="all" name="family" compare="not_eq"><string>sans-serif</string></test>
    <test qual="all" name="family" compare="not_eq"><string>monospace</string></test>
    <edit name="family" mode="append_last"><string>DejaVu Sans</string></edit>
  </match>
  <match target="font">
    <edit name="antialias" mode="assign"><bool>true</bool></edit>
    <edit name="hinting" mode="assign"><bool>false</bool></edit>
    <edit name="hintstyle" mode="assign"><const>hintnone</const></edit>
    <edit name="autohint" mode="assign"><bool>false</bool></edit>
    <edit name="rgba" mode="assign"><const>none</const></edit>
    <edit name="lcdfilter" mode="assign"><const>lcdnone</const></edit>
    <edit name="embeddedbitmap" mode="assign"><bool>false</bool></edit>
  </match>
</fontconfig>
`
	path := filepath.Join(tmp, "fonts.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
