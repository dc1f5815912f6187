package ui_test

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"testing"
)

// How a screenshot is compared with its golden. Both are drawn by the same page from the same
// fixtures with the fonts pinned (fonts_test.go), so on one browser build the pixels repeat
// exactly; the tolerance is for what a browser patch release may move (a shade on the edge of
// a rounded corner or a glyph), and stays well below the smallest change of the page that
// matters: TestScreenshotsCatchChanges renders a changed digit and a changed colour and
// checks that each fails against the goldens, and TestComparePNG checks the arithmetic.
const (
	// channelTolerance is how far a channel may differ (0-255) before the pixel counts as
	// different: anti-aliasing that moves by a shade is not a change of the page.
	channelTolerance = 16
	// maxDiffFraction is the share of pixels of a view that may differ by more than
	// channelTolerance: 0.001%, 11 pixels of 1280x900, 15 of the overview's 1280x1200.
	// Repeated runs (also under load and with -race) differ by one shade on a few rounded
	// corners and nowhere by more, and Chromium 156.0.8078.108 drew the goldens of
	// 156.0.8078.79 pixel for pixel. In TestScreenshotsCatchChanges one digit changed in the
	// overview is 45 pixels and the committed state's colour 24 shades redder 35,925: a share
	// like 0.5% (7,680 of the overview's pixels; another monospace font moves 0.3-0.6%) would
	// let the digit through.
	maxDiffFraction = 0.00001
)

// withinTolerance says whether differ pixels (of comparePNG) out of total pass.
func withinTolerance(differ, total int) bool {
	return float64(differ) <= maxDiffFraction*float64(total)
}

func readPNG(path string) (image.Image, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return img, nil
}

func writePNG(path string, img image.Image) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// comparePNG counts the pixels of got that differ from want by more than channelTolerance
// in a channel, over the union of both sizes (a pixel outside either image differs), and
// returns a diff image: differing pixels red, the others a faded copy of want. Shaded counts
// the pixels that differ at all.
func comparePNG(want, got image.Image) (diff *image.RGBA, differ, shaded, total int) {
	wb, gb := want.Bounds(), got.Bounds()
	r := image.Rect(0, 0, max(wb.Dx(), gb.Dx()), max(wb.Dy(), gb.Dy()))
	diff = image.NewRGBA(r)
	at := func(img image.Image, x, y int) (color.RGBA64, bool) {
		b := img.Bounds()
		p := image.Pt(b.Min.X+x, b.Min.Y+y)
		if !p.In(b) {
			return color.RGBA64{}, false
		}
		return color.RGBA64Model.Convert(img.At(p.X, p.Y)).(color.RGBA64), true
	}
	for y := 0; y < r.Dy(); y++ {
		for x := 0; x < r.Dx(); x++ {
			w, okw := at(want, x, y)
			g, okg := at(got, x, y)
			if !okw || !okg || w != g {
				shaded++
			}
			if okw && okg && close8(w.R, g.R) && close8(w.G, g.G) && close8(w.B, g.B) && close8(w.A, g.A) {
				l := uint8((uint32(w.R>>8)*299 + uint32(w.G>>8)*587 + uint32(w.B>>8)*114) / 1000)
				f := 192 + l/4
				diff.SetRGBA(x, y, color.RGBA{f, f, f, 255})
				continue
			}
			differ++
			diff.SetRGBA(x, y, color.RGBA{255, 0, 0, 255})
		}
	}
	return diff, differ, shaded, r.Dx() * r.Dy()
}

func close8(a, b uint16) bool {
	d := int(a>>8) - int(b>>8)
	return d <= channelTolerance && d >= -channelTolerance
}

// TestComparePNG: what the comparison lets through and what it does not, on made-up images
// of a view's size.
func TestComparePNG(t *testing.T) {
	t.Parallel()
	const w, h = 1280, 900
	base := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			base.SetRGBA(x, y, color.RGBA{uint8(x), uint8(y), uint8(x + y), 255})
		}
	}
	changed := func(change func(img *image.RGBA)) *image.RGBA {
		img := image.NewRGBA(base.Rect)
		copy(img.Pix, base.Pix)
		change(img)
		return img
	}
	// shift moves a channel by d towards the middle, so that it always moves by d.
	shift := func(v uint8, d int) uint8 {
		if v < 128 {
			return v + uint8(d)
		}
		return v - uint8(d)
	}
	shade := func(d int) func(img *image.RGBA) {
		return func(img *image.RGBA) {
			for i := range img.Pix {
				if i%4 != 3 {
					img.Pix[i] = shift(img.Pix[i], d)
				}
			}
		}
	}
	block := func(x0, y0, size int, c color.RGBA) func(img *image.RGBA) {
		return func(img *image.RGBA) {
			for y := y0; y < y0+size; y++ {
				for x := x0; x < x0+size; x++ {
					img.SetRGBA(x, y, c)
				}
			}
		}
	}
	// edges is what a patch release of the browser may do: a few pixels here and there,
	// anti-aliased differently.
	edges := func(img *image.RGBA) {
		for i := range 11 {
			x, y := 100+97*i, 50+71*i
			p := img.RGBAAt(x, y)
			img.SetRGBA(x, y, color.RGBA{shift(p.R, 100), shift(p.G, 60), p.B, 255})
		}
	}
	for _, tc := range []struct {
		name       string
		got        image.Image
		wantDiffer int
		wantShaded int
		pass       bool
	}{
		{"same image", changed(func(*image.RGBA) {}), 0, 0, true},
		{"every pixel a few shades off", changed(shade(channelTolerance)), 0, w * h, true},
		{"a few pixels anti-aliased differently", changed(edges), 11, 11, true},
		{"every pixel a colour step off", changed(shade(channelTolerance + 1)), w * h, w * h, false},
		{"a digit's worth of pixels changed", changed(block(640, 450, 6, color.RGBA{255, 255, 255, 255})), 36, 36, false},
		{"one row shorter", base.SubImage(image.Rect(0, 0, w, h-1)), w, w, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			diff, differ, shaded, total := comparePNG(base, tc.got)
			if differ != tc.wantDiffer || shaded != tc.wantShaded || total != w*h {
				t.Errorf("differ %d, shaded %d, total %d; want %d, %d, %d", differ, shaded, total, tc.wantDiffer, tc.wantShaded, w*h)
			}
			if got := withinTolerance(differ, total); got != tc.pass {
				t.Errorf("within tolerance: %v, want %v (%d of %d pixels differ)", got, tc.pass, differ, total)
			}
			red := 0
			for i := 0; i < len(diff.Pix); i += 4 {
				if diff.Pix[i] == 255 && diff.Pix[i+1] == 0 && diff.Pix[i+2] == 0 {
					red++
				}
			}
			if red != differ {
				t.Errorf("the diff image has %d red pixels, want %d", red, differ)
			}
		})
	}
}
