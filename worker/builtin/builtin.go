// Package builtin wires convo's built-in models and tools into a worker
// Config from worker.Settings: the demo model (package worker/demo)
// always, the OpenAI-compatible model when a base URL or an API key is
// set, and the demo tools. cmd/api and cmd/worker both call Config, so
// they pick models by the same names and settings.
package builtin

import (
	"fmt"
	"log/slog"

	"github.com/convo-dev/convo/worker"
	"github.com/convo-dev/convo/worker/demo"
	"github.com/convo-dev/convo/worker/openai"
)

// Config builds the Config the settings describe. The default provider is
// openai when it is configured, else demo, unless s.DefaultProvider names
// one. It fails for a malformed OpenAI base URL, a default provider that
// is not configured, or a negative worker count, naming the setting.
func Config(s worker.Settings, logger *slog.Logger) (worker.Config, error) {
	cfg, err := s.RuntimeConfig(logger)
	if err != nil {
		return worker.Config{}, err
	}
	models := worker.NewModels("demo")
	models.Register("demo", demo.NewModel(demo.Options{TokensPerSecond: s.DemoTokensPerSecond}), "")
	base := s.OpenAIBaseURL
	if base == "" && s.OpenAIAPIKey != "" {
		base = "https://api.openai.com/v1"
	}
	if base != "" {
		m, err := openai.NewModel(openai.Options{BaseURL: base, APIKey: s.OpenAIAPIKey, Model: s.OpenAIModel})
		if err != nil {
			return worker.Config{}, fmt.Errorf("CONVO_OPENAI_BASE_URL: %w", err)
		}
		models.Register("openai", m, s.OpenAIModel)
		if err := models.SetDefault("openai"); err != nil {
			return worker.Config{}, err
		}
	}
	if s.DefaultProvider != "" {
		if err := models.SetDefault(s.DefaultProvider); err != nil {
			return worker.Config{}, fmt.Errorf("CONVO_DEFAULT_PROVIDER: %w", err)
		}
	}
	cfg.Models, cfg.Tools = models, demo.Tools()
	return cfg, nil
}
