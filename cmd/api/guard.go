package main

import (
	"net/http"

	"github.com/convo-dev/convo/guard"
)

// withGuard puts the host and cross-site checks (package guard) in front
// of h. Without authentication the server trusts whoever reaches it, so
// it answers only to loopback names and CONVO_ALLOWED_HOSTS (a DNS
// rebinding page reaches it under the attacker's name) and refuses
// requests from pages of other sites, unless the CORS policy
// (CONVO_CORS_ORIGINS) allows their origin. With authentication a page
// of another site has no token, so neither check is needed: the Host is
// checked only when CONVO_ALLOWED_HOSTS is set, and a deploy behind its
// own domain works with nothing configured. /healthz is exempt: a load
// balancer calls it by the server's address.
func (m *Main) withGuard(h http.Handler) http.Handler {
	singleUser := m.Config.AuthSecret == "" && m.Config.AuthJWKSURL == ""
	opts := guard.Options{
		CheckHost:       singleUser || len(m.Config.AllowedHosts) > 0,
		AllowedHosts:    m.Config.AllowedHosts,
		RefuseCrossSite: singleUser,
		ExemptPaths:     []string{"/healthz"},
	}
	if m.cors != nil {
		opts.OriginAllowed = m.cors.OriginAllowed
	}
	return guard.Handler(opts, h)
}
