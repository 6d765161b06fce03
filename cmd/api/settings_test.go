package main

import (
	"flag"
	"strings"
	"testing"
)

// TestSettingErrorsNameTheSource checks that an error about a setting's
// value names it as the user gave it: the environment variable and its
// value when it came from the environment, the flag when from a flag
// (flags win over the environment).
func TestSettingErrorsNameTheSource(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{nil, map[string]string{"CONVO_SNAPSHOT_BYTES": "100"}, "CONVO_SNAPSHOT_BYTES=100: want 4096 or more"},
		{[]string{"--snapshot-bytes", "100"}, nil, "--snapshot-bytes 100: want 4096 or more"},
		{[]string{"--snapshot-bytes", "200"}, map[string]string{"CONVO_SNAPSHOT_BYTES": "8192"}, "--snapshot-bytes 200: want 4096 or more"},
		{nil, map[string]string{"CONVO_DB_MAX_CONNS": "1"}, "CONVO_DB_MAX_CONNS=1: want 2 or more"},
		{[]string{"--db-max-conns", "1"}, nil, "--db-max-conns 1: want 2 or more"},
		{nil, map[string]string{"CONVO_SNAPSHOT_CONNS": "0"}, "CONVO_SNAPSHOT_CONNS=0: want 1 or more"},
		{nil, map[string]string{"CONVO_WRITE_TIMEOUT": "10ms"}, "CONVO_WRITE_TIMEOUT=10ms: want 1s or more"},
		{[]string{"--drain-grace", "-1s"}, nil, "--drain-grace -1s: want a duration of 0 or more"},
		{nil, map[string]string{"CONVO_WRITE_BURST": "0"}, "CONVO_WRITE_BURST=0: want at least 1 while the write rate is above 0 (--write-rate 2)"},
		{[]string{"--max-streams", "-1"}, map[string]string{"CONVO_MAX_STREAMS": "5"}, "--max-streams -1: want 0 or more"},
		{[]string{"--search-burst", "0"}, map[string]string{"CONVO_SEARCH_RATE": "1"}, "--search-burst 0: want at least 1 while the search rate is above 0 (CONVO_SEARCH_RATE=1)"},
		{nil, map[string]string{"CONVO_WORKER_DB_CONNS": "1"}, "CONVO_WORKER_DB_CONNS=1: want 2 or more (the batches and the claims each need one)"},
		{[]string{"--workers", "-1"}, nil, "--workers -1: want 0 or more"},
		{[]string{"--reserved-slots", "3"}, map[string]string{"CONVO_WORKERS": "2"}, "--reserved-slots 3: want 0 to the number of workers (CONVO_WORKERS=2)"},
		{nil, map[string]string{"CONVO_FILE_URL_KEY": "00112233"}, "CONVO_FILE_URL_KEY: decodes to 4 bytes; want at least 32 (e.g. openssl rand -hex 32)"},
		{nil, map[string]string{"CONVO_FILE_URL_KEY": "not a key!"}, "CONVO_FILE_URL_KEY: is neither hex nor base64"},
		{[]string{"--file-url-key", "abcd"}, nil, "--file-url-key: decodes to 2 bytes; want at least 32 (e.g. openssl rand -hex 32)"},
		{nil, map[string]string{"CONVO_FILE_URL_TTL": "500ms"}, "CONVO_FILE_URL_TTL=500ms: want 1s or more"},
		{nil, map[string]string{"CONVO_FILE_URL_TTL": "soon"}, `CONVO_FILE_URL_TTL: "soon" is not a duration such as 1h, 30m or 5s`},
	} {
		m := NewMain()
		err := m.ParseFlags(c.args, func(k string) string { return c.env[k] })
		if err == nil || err.Error() != c.want {
			t.Errorf("%v %v: err = %v, want %q", c.args, c.env, err, c.want)
		}
	}
}

// TestEveryFlagNamesItsVariable checks that each flag's usage names its
// environment variable, which errors about its value use (settingNames).
func TestEveryFlagNamesItsVariable(t *testing.T) {
	t.Parallel()
	m := NewMain()
	fs := flag.NewFlagSet("api", flag.ContinueOnError)
	var cors, hosts string
	m.Config.registerFlags(fs, &cors, &hosts)
	names := newSettingNames(fs, func(string) string { return "" })
	fs.VisitAll(func(f *flag.Flag) {
		env := names.envName(f.Name)
		if f.Name == "migrate" {
			return // an action, not a setting
		}
		if !strings.HasPrefix(env, "CONVO_") && env != "DATABASE_URL" {
			t.Errorf("--%s: usage %q names no CONVO_ variable", f.Name, f.Usage)
		}
	})
}
