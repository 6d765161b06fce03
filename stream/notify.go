package stream

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/convo-dev/convo/pglisten"
)

// EventsChannel is the channel the SQL notifies with '<conversation
// id>:<seq>' for each event (convo._append_event, convo.append_block) and
// '<conversation id>:deleted' (convo.delete_conversation); docs/events.md,
// "Notifications".
const EventsChannel = "convo_events"

// NotifyFeed feeds a Hub from the notifications of EventsChannel, heard on
// the process's one LISTEN connection (package pglisten).
type NotifyFeed struct {
	// Listener is the process's listener, which its owner runs. Nil: Run
	// opens and runs one of its own from ConnConfig.
	Listener   *pglisten.Listener
	ConnConfig *pgx.ConnConfig
	Hub        Sink
	Logger     *slog.Logger
	// PingInterval applies to a listener of the feed's own (see
	// pglisten.Options).
	PingInterval time.Duration

	once sync.Once
	own  bool
}

// listener returns the feed's listener, making its own when it has none.
func (f *NotifyFeed) listener() *pglisten.Listener {
	f.once.Do(func() {
		if f.Listener == nil {
			f.own = true
			f.Listener = pglisten.New(pglisten.Options{ConnConfig: f.ConnConfig, Logger: f.Logger, PingInterval: f.PingInterval})
		}
	})
	return f.Listener
}

// Connects counts the listener's successful (re)connections.
func (f *NotifyFeed) Connects() int64 { return f.listener().Connects() }

// Run feeds the hub until ctx ends. After every (re)connect of the
// listener the hub reads every followed conversation again, since
// notifications sent while it was away are lost.
func (f *NotifyFeed) Run(ctx context.Context) {
	l := f.listener()
	l.Listen(EventsChannel, pglisten.Handler{Notify: f.handle, Ready: f.Hub.Resync})
	if f.own {
		l.Run(ctx)
		return
	}
	<-ctx.Done()
}

func (f *NotifyFeed) handle(payload string) {
	idText, seqText, ok := strings.Cut(payload, ":")
	id, err := uuid.Parse(idText)
	if !ok || err != nil {
		return
	}
	if seqText == "deleted" {
		f.Hub.Deleted(id)
		return
	}
	seq, err := strconv.ParseInt(seqText, 10, 64)
	if err != nil {
		return
	}
	f.Hub.Hint(id, seq)
}
