package files

import "testing"

// TestParseRange checks each form of a single range against a file of
// 1000 bytes, the clipping of a range past the end, the 416 cases, and
// that what this server ignores (several ranges, other units, malformed
// ranges) gets the whole file.
func TestParseRange(t *testing.T) {
	t.Parallel()
	const size = 1000
	for _, c := range []struct {
		header string
		want   byteRange
		answer rangeAnswer
	}{
		{"", byteRange{}, wholeFile},
		{"bytes=0-99", byteRange{0, 100}, partOfFile},
		{"bytes=500-", byteRange{500, 500}, partOfFile},
		{"bytes=990-5000", byteRange{990, 10}, partOfFile},
		{"bytes=-10", byteRange{990, 10}, partOfFile},
		{"bytes=-5000", byteRange{0, 1000}, partOfFile},
		{"bytes=999-999", byteRange{999, 1}, partOfFile},
		{"bytes=1000-", byteRange{}, unsatisfiable},
		{"bytes=1000-2000", byteRange{}, unsatisfiable},
		{"bytes=-0", byteRange{}, unsatisfiable},
		{"bytes=0-1,5-6", byteRange{}, wholeFile},
		{"items=0-1", byteRange{}, wholeFile},
		{"bytes=5-1", byteRange{}, wholeFile},
		{"bytes=+5-10", byteRange{}, wholeFile},
		{"bytes=a-b", byteRange{}, wholeFile},
		{"bytes=5", byteRange{}, wholeFile},
		{"bytes=99999999999999999999-", byteRange{}, wholeFile},
	} {
		got, answer := parseRange(c.header, size)
		if got != c.want || answer != c.answer {
			t.Errorf("%q: %+v, %v; want %+v, %v", c.header, got, answer, c.want, c.answer)
		}
	}
	if _, answer := parseRange("bytes=0-", 0); answer != unsatisfiable {
		t.Errorf("a range of an empty file: %v; want unsatisfiable", answer)
	}
}

// TestETagMatches checks If-None-Match's forms: a list, a weak tag, "*".
func TestETagMatches(t *testing.T) {
	t.Parallel()
	const etag = `"abc"`
	for header, want := range map[string]bool{
		`"abc"`: true, `"x", "abc"`: true, `W/"abc"`: true, `*`: true,
		`"abcd"`: false, `abc`: false, ``: false,
	} {
		if got := etagMatches(header, etag); got != want {
			t.Errorf("If-None-Match %q: %v; want %v", header, got, want)
		}
	}
}

// TestDisposition checks that only the raster image types are inline,
// and that the filename is in both RFC 6266 forms.
func TestDisposition(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ mediaType, filename, want string }{
		{"image/png", "a.png", `inline; filename="a.png"; filename*=UTF-8''a.png`},
		{"image/jpeg", "a.jpg", `inline; filename="a.jpg"; filename*=UTF-8''a.jpg`},
		{"image/svg+xml", "a.svg", `attachment; filename="a.svg"; filename*=UTF-8''a.svg`},
		{"text/html; charset=utf-8", "x.html", `attachment; filename="x.html"; filename*=UTF-8''x.html`},
		{"application/pdf", `résumé "v2".pdf`, `attachment; filename="r_sum_ _v2_.pdf"; filename*=UTF-8''r%C3%A9sum%C3%A9%20%22v2%22.pdf`},
	} {
		if got := disposition(c.mediaType, c.filename); got != c.want {
			t.Errorf("%s %q:\n got %s\nwant %s", c.mediaType, c.filename, got, c.want)
		}
	}
}
