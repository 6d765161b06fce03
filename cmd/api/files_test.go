package main

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestFileSettings(t *testing.T) {
	t.Parallel()
	parse := func(args []string, env map[string]string) (FileSettings, error) {
		m := NewMain()
		err := m.ParseFlags(args, func(k string) string { return env[k] })
		return m.Config.Files, err
	}
	s, err := parse(nil, nil)
	want := FileSettings{MaxBytes: 25 << 20, UserBytes: 1 << 30, MaxPerMessage: 10, Grace: 24 * time.Hour, UploadTimeout: 10 * time.Minute}
	if err != nil || s != want {
		t.Fatalf("defaults = %+v, %v; want %+v", s, err, want)
	}
	s, err = parse([]string{"--file-grace", "2h"}, map[string]string{
		"CONVO_FILE_MAX_BYTES": "1000", "CONVO_FILE_USER_BYTES": "5000", "CONVO_FILE_MAX_PER_MESSAGE": "3", "CONVO_FILE_GRACE": "1h",
		"CONVO_FILE_UPLOAD_TIMEOUT": "30m"})
	want = FileSettings{MaxBytes: 1000, UserBytes: 5000, MaxPerMessage: 3, Grace: 2 * time.Hour, UploadTimeout: 30 * time.Minute}
	if err != nil || s != want {
		t.Errorf("configured = %+v, %v; want %+v", s, err, want)
	}
	if l := s.limits(); l.MaxFileBytes != 1000 || l.MaxUserBytes != 5000 || l.MaxFilesPerMessage != 3 {
		t.Errorf("limits = %+v", l)
	}
	for _, c := range []struct {
		env  map[string]string
		says string
	}{
		{map[string]string{"CONVO_FILE_MAX_BYTES": "0"}, "CONVO_FILE_MAX_BYTES=0: want 1 or more"},
		{map[string]string{"CONVO_FILE_MAX_BYTES": "25MB"}, "CONVO_FILE_MAX_BYTES"},
		{map[string]string{"CONVO_FILE_USER_BYTES": "-1"}, "CONVO_FILE_USER_BYTES=-1: want 1 or more"},
		{map[string]string{"CONVO_FILE_MAX_PER_MESSAGE": "0"}, "CONVO_FILE_MAX_PER_MESSAGE=0"},
		{map[string]string{"CONVO_FILE_GRACE": "10s"}, "CONVO_FILE_GRACE=10s: want 1m0s or more"},
		{map[string]string{"CONVO_FILE_GRACE": "soon"}, "CONVO_FILE_GRACE"},
		{map[string]string{"CONVO_FILE_GRACE": "5m"}, "CONVO_FILE_GRACE=5m: want 1m0s or more, and more than --file-upload-timeout 10m0s"},
		{map[string]string{"CONVO_FILE_UPLOAD_TIMEOUT": "0s"}, "CONVO_FILE_UPLOAD_TIMEOUT=0s: want 1s or more"},
	} {
		if _, err := parse(nil, c.env); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%v: %v, want an error saying %q", c.env, err, c.says)
		}
	}
}

// TestUploadBodyTimeout: an upload's body has CONVO_FILE_UPLOAD_TIMEOUT to
// arrive, every other body CONVO_BODY_TIMEOUT.
func TestUploadBodyTimeout(t *testing.T) {
	t.Parallel()
	m := NewMain()
	if err := m.ParseFlags(nil, func(k string) string {
		return map[string]string{"CONVO_BODY_TIMEOUT": "7s", "CONVO_FILE_UPLOAD_TIMEOUT": "3m"}[k]
	}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		method, path string
		want         time.Duration
	}{
		{"POST", "/v1/files", 3 * time.Minute},
		{"POST", "/v1/ai-sdk/chat", 7 * time.Second},
		{"POST", "/convo.v1.ConversationService/SendMessage", 7 * time.Second},
		{"GET", "/v1/files", 7 * time.Second},
	} {
		if got := m.bodyTimeout(httptest.NewRequest(c.method, c.path, nil)); got != c.want {
			t.Errorf("%s %s: %v, want %v", c.method, c.path, got, c.want)
		}
	}
}
