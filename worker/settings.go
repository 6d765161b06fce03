package worker

import (
	"flag"
	"fmt"
	"log/slog"
	"strconv"
	"time"
)

// Settings are the worker runtime's knobs, and those of the built-in
// models, as plain values, read from the environment (FromEnv) and flags
// (RegisterFlags) the same way by cmd/api and cmd/worker, then turned into
// a Config by package worker/builtin.
type Settings struct {
	Workers             int           // CONVO_WORKERS, --workers: default 1; 0 runs none
	InputExpiry         time.Duration // CONVO_INPUT_EXPIRY, --input-expiry: default 0 (never); how long a request for input waits before it expires (a denial)
	ReservedSlots       int           // CONVO_WORKER_RESERVED_SLOTS, --reserved-slots: default 0; of Workers, the slots only users with nothing running may take
	DBConns             int           // CONVO_WORKER_DB_CONNS, --worker-db-conns: default 4; the workers' connections, whatever Workers is
	Name                string        // CONVO_WORKER_NAME, --worker-name: default host-pid-random
	LeaseSeconds        int           // CONVO_WORKER_LEASE_SECONDS, --lease-seconds: default 30
	PollInterval        time.Duration // CONVO_WORKER_POLL_INTERVAL, --poll-interval: default 10s
	BatchInterval       time.Duration // CONVO_BATCH_INTERVAL, --batch-interval: default 20ms; negative: no batching
	MaxToolRounds       int           // CONVO_MAX_TOOL_ROUNDS, --max-tool-rounds: default 8
	DemoTokensPerSecond float64       // CONVO_DEMO_TOKENS_PER_SECOND, --demo-tokens-per-second: default 40
	// DefaultProvider is the provider of a prompt that names none:
	// "demo" or "openai". Default: openai when it is configured, else demo.
	DefaultProvider string // CONVO_DEFAULT_PROVIDER, --default-provider
	OpenAIBaseURL   string // CONVO_OPENAI_BASE_URL, --openai-base-url: default https://api.openai.com/v1 when a key is set
	OpenAIAPIKey    string // CONVO_OPENAI_API_KEY (environment only, so it stays out of ps)
	OpenAIModel     string // CONVO_OPENAI_MODEL, --openai-model: default gpt-4o-mini
}

// DefaultSettings returns the defaults listed on Settings.
func DefaultSettings() Settings {
	return Settings{
		Workers: 1, DBConns: 4, LeaseSeconds: 30, PollInterval: 10 * time.Second, BatchInterval: 20 * time.Millisecond,
		MaxToolRounds: 8, DemoTokensPerSecond: 40, OpenAIModel: "gpt-4o-mini",
	}
}

// FromEnv reads the CONVO_* variables named on Settings through getenv;
// unset ones keep their value. It fails for a malformed number or
// duration, naming the variable.
func (s *Settings) FromEnv(getenv func(string) string) error {
	str := func(dst *string, name string) {
		if v := getenv(name); v != "" {
			*dst = v
		}
	}
	num := func(dst *int, name string) error {
		if v := getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				return fmt.Errorf("%s: %q is not a whole number", name, v)
			}
			*dst = n
		}
		return nil
	}
	dur := func(dst *time.Duration, name string) error {
		if v := getenv(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				return fmt.Errorf("%s: %q is not a duration such as 20ms or 10s", name, v)
			}
			*dst = d
		}
		return nil
	}
	str(&s.Name, "CONVO_WORKER_NAME")
	str(&s.DefaultProvider, "CONVO_DEFAULT_PROVIDER")
	str(&s.OpenAIBaseURL, "CONVO_OPENAI_BASE_URL")
	str(&s.OpenAIAPIKey, "CONVO_OPENAI_API_KEY")
	str(&s.OpenAIModel, "CONVO_OPENAI_MODEL")
	for _, err := range []error{
		num(&s.Workers, "CONVO_WORKERS"),
		num(&s.ReservedSlots, "CONVO_WORKER_RESERVED_SLOTS"),
		num(&s.DBConns, "CONVO_WORKER_DB_CONNS"),
		num(&s.LeaseSeconds, "CONVO_WORKER_LEASE_SECONDS"),
		num(&s.MaxToolRounds, "CONVO_MAX_TOOL_ROUNDS"),
		dur(&s.PollInterval, "CONVO_WORKER_POLL_INTERVAL"),
		dur(&s.BatchInterval, "CONVO_BATCH_INTERVAL"),
		dur(&s.InputExpiry, "CONVO_INPUT_EXPIRY"),
	} {
		if err != nil {
			return err
		}
	}
	if v := getenv("CONVO_DEMO_TOKENS_PER_SECOND"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("CONVO_DEMO_TOKENS_PER_SECOND: %q is not a number", v)
		}
		s.DemoTokensPerSecond = f
	}
	return nil
}

// RegisterFlags defines a flag for every setting but the API key on fs,
// with the current values as defaults.
func (s *Settings) RegisterFlags(fs *flag.FlagSet) {
	fs.IntVar(&s.Workers, "workers", s.Workers, "how many prompts to run at once (CONVO_WORKERS); 0 runs none")
	fs.IntVar(&s.ReservedSlots, "reserved-slots", s.ReservedSlots, "of the workers, how many only claim for users with nothing running, so a newcomer starts at once while others flood (CONVO_WORKER_RESERVED_SLOTS); default 0")
	fs.IntVar(&s.DBConns, "worker-db-conns", s.DBConns, "connections the workers use, however many prompts run (CONVO_WORKER_DB_CONNS); at least 2")
	fs.StringVar(&s.Name, "worker-name", s.Name, "name of this process's workers (CONVO_WORKER_NAME); default host-pid-random")
	fs.IntVar(&s.LeaseSeconds, "lease-seconds", s.LeaseSeconds, "the process's lease, which holds every prompt it claims, renewed by one heartbeat every third of it (CONVO_WORKER_LEASE_SECONDS)")
	fs.DurationVar(&s.PollInterval, "poll-interval", s.PollInterval, "how often idle workers poll besides LISTEN (CONVO_WORKER_POLL_INTERVAL)")
	fs.DurationVar(&s.BatchInterval, "batch-interval", s.BatchInterval, "shortest time between two writes of streamed text to a block (CONVO_BATCH_INTERVAL); negative: no batching")
	fs.DurationVar(&s.InputExpiry, "input-expiry", s.InputExpiry, "how long a request for input (an approval, a client tool's output, a question) waits before it expires, which the model reads as a denial (CONVO_INPUT_EXPIRY); 0: until answered")
	fs.IntVar(&s.MaxToolRounds, "max-tool-rounds", s.MaxToolRounds, "how many tool rounds one prompt may take (CONVO_MAX_TOOL_ROUNDS)")
	fs.Float64Var(&s.DemoTokensPerSecond, "demo-tokens-per-second", s.DemoTokensPerSecond, "pace of the demo model (CONVO_DEMO_TOKENS_PER_SECOND); negative: no pause")
	fs.StringVar(&s.DefaultProvider, "default-provider", s.DefaultProvider, "provider of prompts that name none, demo or openai (CONVO_DEFAULT_PROVIDER); default openai when configured")
	fs.StringVar(&s.OpenAIBaseURL, "openai-base-url", s.OpenAIBaseURL, "OpenAI-compatible API root, e.g. http://127.0.0.1:11434/v1 (CONVO_OPENAI_BASE_URL); the key is read from CONVO_OPENAI_API_KEY")
	fs.StringVar(&s.OpenAIModel, "openai-model", s.OpenAIModel, "model of openai prompts that name none (CONVO_OPENAI_MODEL)")
}

// envOfFlag is the environment variable of each flag Check names.
var envOfFlag = map[string]string{
	"workers": "CONVO_WORKERS", "reserved-slots": "CONVO_WORKER_RESERVED_SLOTS",
	"input-expiry": "CONVO_INPUT_EXPIRY", "worker-db-conns": "CONVO_WORKER_DB_CONNS",
}

// Check refuses settings out of range. It names each setting through
// name, given the flag's name without dashes (for example
// "worker-db-conns"), so that a program that knows whether the user set
// the variable or the flag names that one; a nil name gives the variable
// and the value, such as CONVO_WORKERS=-1.
func (s Settings) Check(name func(flag string) string) error {
	if name == nil {
		name = func(flag string) string {
			v := map[string]any{"workers": s.Workers, "reserved-slots": s.ReservedSlots,
				"input-expiry": s.InputExpiry, "worker-db-conns": s.DBConns}[flag]
			return fmt.Sprintf("%s=%v", envOfFlag[flag], v)
		}
	}
	if s.Workers < 0 {
		return fmt.Errorf("%s: want 0 or more", name("workers"))
	}
	if s.ReservedSlots < 0 || s.ReservedSlots > max(s.Workers, 0) {
		return fmt.Errorf("%s: want 0 to the number of workers (%s)", name("reserved-slots"), name("workers"))
	}
	if s.InputExpiry < 0 {
		return fmt.Errorf("%s: want 0 (never) or more", name("input-expiry"))
	}
	if s.DBConns < 2 {
		return fmt.Errorf("%s: want 2 or more (the batches and the claims each need one)", name("worker-db-conns"))
	}
	return nil
}

// RuntimeConfig turns the settings of the runtime into a Config. Models
// and Tools are left empty: builtin.Config (package worker/builtin) fills
// them from the settings of the built-in models (demo, openai). It fails
// as Check(nil) does.
func (s Settings) RuntimeConfig(logger *slog.Logger) (Config, error) {
	if err := s.Check(nil); err != nil {
		return Config{}, err
	}
	return Config{
		Workers: s.Workers, ReservedSlots: s.ReservedSlots, Name: s.Name, LeaseSeconds: s.LeaseSeconds, PollInterval: s.PollInterval,
		BatchInterval: s.BatchInterval, MaxToolRounds: s.MaxToolRounds, InputExpiry: s.InputExpiry, Logger: logger,
	}, nil
}
