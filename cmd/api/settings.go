package main

import (
	"flag"
	"regexp"
)

// settingNames names a setting the way the user gave it, so that an error
// about its value points at what they typed: `CONVO_SNAPSHOT_BYTES=100`
// when the value came from the environment, `--snapshot-bytes 100` when it
// came from a flag (flags win) or is the default.
type settingNames struct {
	fs     *flag.FlagSet
	getenv func(string) string
	given  map[string]bool // flags on the command line
}

func newSettingNames(fs *flag.FlagSet, getenv func(string) string) settingNames {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	return settingNames{fs: fs, getenv: getenv, given: given}
}

// envOfFlag finds a flag's environment variable in its usage text, where
// every setting's flag names it: "… (CONVO_SNAPSHOT_BYTES)".
var envOfFlag = regexp.MustCompile(`\(((?:CONVO_|DATABASE_URL)[A-Z0-9_]*)\)`)

// envName returns the environment variable of the flag name, or "".
func (s settingNames) envName(name string) string {
	f := s.fs.Lookup(name)
	if f == nil {
		return ""
	}
	if m := envOfFlag.FindStringSubmatch(f.Usage); m != nil {
		return m[1]
	}
	return ""
}

// name returns the setting of flag name with its value as given:
// "CONVO_X=value" when the environment set it and no flag did, else
// "--x value".
func (s settingNames) name(name string) string {
	if !s.given[name] {
		if env := s.envName(name); env != "" {
			if v := s.getenv(env); v != "" {
				return env + "=" + v
			}
		}
	}
	v := ""
	if f := s.fs.Lookup(name); f != nil {
		v = f.Value.String()
	}
	return "--" + name + " " + v
}
