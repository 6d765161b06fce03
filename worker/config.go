package worker

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/files"
	"github.com/convo-dev/convo/pglisten"
	"github.com/convo-dev/convo/telemetry"
)

// Config configures a Pool of workers. The zero value of every field but
// Workers means its default.
type Config struct {
	// Workers is how many prompts this process runs at once; 0 runs none.
	Workers int
	// ReservedSlots is how many of the Workers slots are kept for users
	// who have no prompt running or claimed anywhere: a user with a
	// backlog never takes the last ReservedSlots free slots, so that a
	// user who sends a prompt while others flood the queue starts at once
	// instead of waiting for a reply to end (replies are never
	// preempted). The cost: with fewer users than slots, up to
	// ReservedSlots slots stay idle. 0 to Workers; default 0 (none). See
	// docs/workers.md, "Fair slots".
	ReservedSlots int
	// InputExpiry is how long a request for input waits (an approval, a
	// client tool's output, an ask_user answer) before it expires, which
	// the model reads as a denial, for tools that set no InputExpiry of
	// their own. 0 (the default): requests wait until answered or
	// cancelled.
	InputExpiry time.Duration
	// Name identifies this process in claims (every prompt it runs is held
	// by Name), in its batches and in the error of a prompt whose lease
	// expired. It must be unique among running processes. Default:
	// "<hostname>-<pid>-<random>".
	Name string
	// LeaseSeconds is how long the process's lease (convo.worker_heartbeat)
	// lasts without a heartbeat (1 to 3600); it keeps every prompt the
	// process holds. A process that dies mid-reply leaves its prompts
	// running until the lease expires; then they are failed, and those it
	// claimed but never started go back to the queue. A process whose
	// heartbeats do not get through for as long stops its replies. Default
	// 30.
	LeaseSeconds int
	// HeartbeatInterval is how often the process's lease is extended: one
	// call per interval, however many prompts run, on its own schedule
	// (never behind the batches of replies' output). Default: a third of
	// the lease.
	HeartbeatInterval time.Duration
	// PollInterval is how often an idle worker looks for prompts without
	// being woken by a notification: a safety net for missed
	// notifications. Default 10 s.
	PollInterval time.Duration
	// BatchInterval is the shortest time between two batches of one lane
	// (see BatchLanes): text streamed meanwhile to one block (or one tool
	// call's output) is coalesced into one delta. Under load the pause
	// after a batch grows to the time the batch took. Negative: no pause
	// and no coalescing, every chunk its own delta. Default 20 ms.
	BatchInterval time.Duration
	// BatchBytes writes coalesced text at once when this much is waiting.
	// Default 4096.
	BatchBytes int
	// BatchLanes is how many batches the pool writes at once, each on its
	// own connection, each holding the replies of its share of the
	// conversations: PostgreSQL writes them on as many cores. Default 2.
	BatchLanes int
	// MaxToolRounds bounds how many times one prompt may call tools and
	// continue the model. Default 8.
	MaxToolRounds int
	// MaxToolOutput is how many bytes of a tool's progress output, and of
	// its result, are streamed; the rest is cut, with the full length
	// recorded. Default 16384.
	MaxToolOutput int
	// ToolTimeout bounds one tool call. Default 2 minutes.
	ToolTimeout time.Duration
	// CallTimeout bounds each SQL call. Default 15 s.
	CallTimeout time.Duration
	// Models are the providers prompts may ask for (required; package
	// worker/builtin registers the demo and OpenAI-compatible ones).
	Models *Models
	// Tools are the tools models may call. Default: none.
	Tools *Tools
	// Logger defaults to slog.Default.
	Logger *slog.Logger
	// Listener is the process's LISTEN connection (package pglisten),
	// which its owner runs: the workers listen on PromptsChannel through
	// it. Nil: the pool opens and runs one of its own.
	Listener *pglisten.Listener
	// Blobs reads the bytes of files stored in S3 (convo.file_blobs'
	// storage "s3", the object named by the file's BlobID): the server's
	// bucket, as cmd/api and cmd/worker open it from CONVO_FILE_STORAGE
	// and CONVO_S3_*. Nil: File.Open of such a file returns an error
	// wrapping ErrFileUnavailable. Files stored in PostgreSQL are read
	// through convo.file_chunk whatever Blobs is.
	Blobs files.Blobs
	// Telemetry, when it exports, traces each prompt (continuing the
	// trace of the request that sent it), its model rounds and tool calls,
	// and records the GenAI metrics (docs/operations.md, "OpenTelemetry").
	// Nil: none.
	Telemetry *telemetry.Telemetry
	// OnPromptDone, when set, is called after each prompt a worker took
	// has been settled, from that worker's goroutine: for metrics and
	// tests. It must not block for long.
	OnPromptDone func(Result)

	// wrapAPI lets tests watch or alter the SQL calls.
	wrapAPI func(sqlAPI) sqlAPI
}

// withDefaults returns c with every zero field set to its default, or an
// error for a value out of range.
func (c Config) withDefaults() (Config, error) {
	if c.Workers < 0 {
		return c, fmt.Errorf("workers must be 0 or more, got %d", c.Workers)
	}
	if c.ReservedSlots < 0 || c.ReservedSlots > max(c.Workers, 0) {
		return c, fmt.Errorf("reserved slots must be 0 to workers (%d), got %d", c.Workers, c.ReservedSlots)
	}
	if c.Name == "" {
		c.Name = defaultName()
	}
	if c.LeaseSeconds == 0 {
		c.LeaseSeconds = 30
	}
	if c.LeaseSeconds < 1 || c.LeaseSeconds > 3600 {
		return c, fmt.Errorf("lease must be 1 to 3600 seconds, got %d", c.LeaseSeconds)
	}
	lease := time.Duration(c.LeaseSeconds) * time.Second
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = lease / 3
	}
	if c.HeartbeatInterval >= lease {
		return c, fmt.Errorf("heartbeat interval %s must be shorter than the lease (%s)", c.HeartbeatInterval, lease)
	}
	if c.PollInterval <= 0 {
		c.PollInterval = 10 * time.Second
	}
	if c.BatchInterval == 0 {
		c.BatchInterval = 20 * time.Millisecond
	}
	if c.BatchBytes <= 0 {
		c.BatchBytes = 4096
	}
	if c.BatchLanes <= 0 {
		c.BatchLanes = 2
	}
	if c.MaxToolRounds <= 0 {
		c.MaxToolRounds = 8
	}
	if c.MaxToolOutput <= 0 {
		c.MaxToolOutput = 16 << 10
	}
	if c.ToolTimeout <= 0 {
		c.ToolTimeout = 2 * time.Minute
	}
	if c.CallTimeout <= 0 {
		c.CallTimeout = 15 * time.Second
	}
	if c.Models == nil {
		return c, errors.New("no models: Config.Models must register at least the default provider (package worker/builtin registers the built-in ones)")
	}
	if _, ok := c.Models.byName[c.Models.defaultName]; !ok {
		return c, fmt.Errorf("the default model provider %q is not registered", c.Models.defaultName)
	}
	if c.Tools == nil {
		c.Tools = &Tools{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

func defaultName() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "worker"
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// Outcome is how a worker left a prompt.
type Outcome string

const (
	// OutcomeCompleted: the reply is complete.
	OutcomeCompleted Outcome = "completed"
	// OutcomeFailed: the worker failed the prompt (Result.Err says why).
	OutcomeFailed Outcome = "failed"
	// OutcomeCancelled: the prompt was cancelled; the worker stopped and
	// wrote nothing more.
	OutcomeCancelled Outcome = "cancelled"
	// OutcomeStopped: the prompt was no longer the worker's (cancelled,
	// its lease expired, or another worker holds it); the worker stopped
	// and wrote nothing more.
	OutcomeStopped Outcome = "stopped"
	// OutcomeWaiting: a tool call waits for a person (an approval, a
	// client tool, a question); the prompt waits, held by no one, until
	// the answer queues it again for any worker to resume.
	OutcomeWaiting Outcome = "waiting"
)

// Result is what a worker did with one prompt.
type Result struct {
	PromptID uuid.UUID
	Worker   string
	Outcome  Outcome
	// Err is why the prompt failed or stopped; nil when it completed.
	Err error
	// Rounds is how many times the model ran.
	Rounds int
	// Deltas is how many append_block and tool_call_progress calls the
	// reply took (after batching).
	Deltas   int
	Duration time.Duration
}

// Reasons a prompt's context ends; context.Cause tells them apart.
var (
	errCancelled = errors.New("the prompt was cancelled")
	errLost      = errors.New("the prompt is no longer this worker's (cancelled, lease expired or taken over)")
	errShutdown  = errors.New("the worker is shutting down")
	errSettled   = errors.New("the prompt is settled")
)
