package worker

import (
	"io"
	"slices"
	"strings"
	"testing"
)

func TestSSEReader(t *testing.T) {
	t.Parallel()
	in := ": comment\n\ndata: one\n\nevent: message\ndata: two\ndata: lines\nid: 3\n\r\ndata:three\r\n\r\ndata: cut"
	r := newSSEReader(strings.NewReader(in))
	var got []string
	for {
		d, err := r.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, d)
	}
	if want := []string{"one", "two\nlines", "three", "cut"}; !slices.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
}
