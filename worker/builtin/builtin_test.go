package builtin

import (
	"strings"
	"testing"
	"time"

	"github.com/convo-dev/convo/worker"
)

func TestSettings(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"CONVO_WORKERS": "3", "CONVO_WORKER_RESERVED_SLOTS": "1", "CONVO_WORKER_LEASE_SECONDS": "12", "CONVO_BATCH_INTERVAL": "5ms",
		"CONVO_DEMO_TOKENS_PER_SECOND": "1000", "CONVO_OPENAI_BASE_URL": "http://127.0.0.1:11434/v1",
		"CONVO_OPENAI_MODEL": "llama3.2",
	}
	s := worker.DefaultSettings()
	if err := s.FromEnv(func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	cfg, err := Config(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Workers != 3 || cfg.ReservedSlots != 1 || cfg.LeaseSeconds != 12 || cfg.BatchInterval != 5*time.Millisecond ||
		cfg.Models.Default() != "openai" || resolvedModel(t, cfg.Models, "openai") != "llama3.2" || len(cfg.Tools.Specs()) != 5 {
		t.Errorf("config %+v, default %s", cfg, cfg.Models.Default())
	}
	// Without OpenAI, the demo is the default; asking for openai fails.
	s = worker.DefaultSettings()
	if cfg, err := Config(s, nil); err != nil || cfg.Models.Default() != "demo" || len(cfg.Models.Names()) != 1 {
		t.Errorf("demo only: %v %v", cfg.Models.Names(), err)
	}
	s.DefaultProvider = "openai"
	if _, err := Config(s, nil); err == nil {
		t.Error("default provider openai without a base url: no error")
	}
	s = worker.DefaultSettings()
	s.ReservedSlots = 2
	if _, err := Config(s, nil); err == nil || !strings.Contains(err.Error(), "CONVO_WORKER_RESERVED_SLOTS") {
		t.Errorf("2 reserved slots of 1 worker: %v", err)
	}
	for name, value := range map[string]string{"CONVO_WORKERS": "many", "CONVO_WORKER_RESERVED_SLOTS": "one", "CONVO_BATCH_INTERVAL": "20", "CONVO_DEMO_TOKENS_PER_SECOND": "fast"} {
		s := worker.DefaultSettings()
		if err := s.FromEnv(func(k string) string {
			if k == name {
				return value
			}
			return ""
		}); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%s: %v", name, value, err)
		}
	}
}

// resolvedModel is the model a configuration naming only provider gets.
func resolvedModel(t *testing.T, ms *worker.Models, provider string) string {
	t.Helper()
	_, c, err := ms.Resolve(worker.ModelConfig{Provider: provider})
	if err != nil {
		t.Fatal(err)
	}
	return c.Model
}
