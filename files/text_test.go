package files

import (
	"bytes"
	"testing"
)

func TestDecodeText(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in, want string
	}{
		{"plain words", "plain words"},
		{"caf\u00e9 \u20ac \U0001F998", "caf\u00e9 \u20ac \U0001F998"},
		{"caf\xe9 x", "caf\uFFFD x"},           // Latin-1
		{"a\x00b", "a\uFFFDb"},                 // PostgreSQL text holds no NUL
		{"\xff\xfe", "\uFFFD\uFFFD"},           // each invalid byte
		{"\xed\xa0\x80", "\uFFFD\uFFFD\uFFFD"}, // a surrogate
		{"\xc0\xaf", "\uFFFD\uFFFD"},           // an overlong form
		{"end \xe2\x82", "end "},               // a sequence cut at the end: dropped
		{"end \xe2", "end "},
		{"\xe2\x82 x", "\uFFFD\uFFFD x"}, // cut, but not at the end
	} {
		if got := DecodeText([]byte(c.in)); got != c.want {
			t.Errorf("DecodeText(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestIsText(t *testing.T) {
	t.Parallel()
	for mediaType, want := range map[string]bool{
		"text/plain; charset=utf-8": true, "text/csv": true, "text/markdown; charset=utf-8": true, "TEXT/Plain": true,
		"image/png": false, "application/pdf": false, "application/json": false, "text": false, "": false,
	} {
		if got := IsText(mediaType); got != want {
			t.Errorf("IsText(%q) = %v, want %v", mediaType, got, want)
		}
	}
}

func TestTextCaptureKeepsTheStart(t *testing.T) {
	t.Parallel()
	c := &textCapture{max: 10}
	for _, p := range []string{"0123", "456789ab", "cdef"} {
		if n, err := c.Write([]byte(p)); n != len(p) || err != nil {
			t.Fatalf("Write(%q) = %d, %v: a capture must take every byte", p, n, err)
		}
	}
	if !bytes.Equal(c.buf, []byte("0123456789")) || cap(c.buf) != 10 {
		t.Errorf("kept %q (capacity %d), want the first 10 bytes in 10", c.buf, cap(c.buf))
	}
}
