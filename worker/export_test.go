package worker

// Hooks for the external tests (package worker_test), compiled only into
// the test binary.

// SQLAPI is the worker's view of the SQL worker API, for tests that watch
// or alter its calls.
type SQLAPI = sqlAPI

// WithWrapAPI returns cfg whose SQL calls go through wrap.
func WithWrapAPI(cfg Config, wrap func(SQLAPI) SQLAPI) Config {
	cfg.wrapAPI = wrap
	return cfg
}

// ErrShutdown is the cause that Stop ends the prompts in flight with.
var ErrShutdown = errShutdown

// Cancel ends the pool's context with cause, as Stop does first.
func (p *Pool) Cancel(cause error) { p.cancel(cause) }

// The claim's sizes (pool.go), for TestBurstClaimedAFewAtATime.
const (
	ClaimFirst  = claimFirst
	ClaimMin    = claimMin
	ClaimTarget = claimTarget
)
