package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/db/sqlstate"
	"github.com/convo-dev/convo/worker/internal/wdb"
)

// run is one prompt in the hands of the pool.
type run struct {
	p      *Pool
	worker string
	claim  wdb.PromptClaimManyRow
	log    *slog.Logger
	ctx    context.Context // ends when the worker must stop writing
	cancel context.CancelCauseFunc
	w      *writer
	rounds int
	// tools are the worker's tools and the client tools the prompt
	// declares (withDeclared).
	tools *Tools
	// usage is the sum of the rounds' usage; nil: no round reported one.
	usage *Usage
	// round is the model round's span while it runs and its tools run
	// (nil: telemetry off).
	round *roundSpan
}

// handle runs a claimed prompt to its end and settles it: completed,
// failed with a clear error, or left alone when it is no longer ours.
func (p *Pool) handle(ctx context.Context, claim wdb.PromptClaimManyRow, epoch int) {
	started := time.Now()
	ctx, span := p.otel.startPrompt(ctx, claim, p.cfg.Name)
	pctx, cancel := context.WithCancelCause(ctx)
	r := &run{
		p: p, worker: p.cfg.Name, claim: claim, ctx: pctx, cancel: cancel,
		log: p.cfg.Logger.With("worker", p.cfg.Name, "prompt_id", claim.PromptID, "conversation_id", claim.ConversationID),
	}
	p.register(claim.PromptID, cancel, epoch)
	defer p.unregister(claim.PromptID)
	w, err := newWriter(pctx, cancel, p.committerFor(claim.ConversationID), p.urgent, claim.PromptID)
	if err != nil {
		// The pool is stopping: the prompt was claimed but not started.
		cancel(errShutdown)
		r.release()
		span.end(OutcomeStopped, errShutdown, nil)
		return
	}
	r.w = w

	err = r.execute()
	outcome, err := r.settle(err)
	cancel(errSettled)
	r.w.close()

	res := Result{
		PromptID: claim.PromptID, Worker: r.worker, Outcome: outcome, Err: err,
		Rounds: r.rounds, Deltas: r.w.deltaCount(), Duration: time.Since(started),
	}
	p.metrics.settled(outcome, res.Duration)
	span.end(outcome, err, r.usage)
	switch outcome {
	case OutcomeCompleted:
		r.log.Info("prompt completed", "rounds", res.Rounds, "deltas", res.Deltas, "duration", res.Duration)
	case OutcomeFailed:
		r.log.Warn("prompt failed", "err", err, "duration", res.Duration)
	case OutcomeWaiting:
		r.log.Info("prompt waits for input", "rounds", res.Rounds, "duration", res.Duration)
	default:
		r.log.Info("prompt stopped", "outcome", outcome, "reason", err, "duration", res.Duration)
	}
	if p.cfg.OnPromptDone != nil {
		p.cfg.OnPromptDone(res)
	}
}

// execute starts the prompt and runs the model (and its tools) until the
// reply is complete.
func (r *run) execute() (err error) {
	defer func() {
		if v := recover(); v != nil {
			r.log.Error("worker panicked", "panic", v, "stack", string(debug.Stack()))
			err = fmt.Errorf("the worker crashed: %v", v)
		}
	}()
	// start_prompt goes in the next batch while the conversation is read,
	// and the model is called without waiting for it: its first text
	// queues behind the start (the writer applies its ops in order, and
	// the start often commits in the same batch as that text), so a burst
	// of replies costs one batch round before the first delta, not two. A
	// prompt cancelled between its claim and its start is refused with
	// the start; the writer stops, which stops the model, and nothing of
	// its output is written.
	if err := r.w.start(); err != nil {
		return err
	}

	cfg, err := ParseModelConfig(r.claim.ModelConfig)
	if err != nil {
		return err
	}
	model, cfg, err := r.p.cfg.Models.Resolve(cfg)
	if err != nil {
		return err
	}
	r.log = r.log.With("provider", cfg.Provider, "model", cfg.Model)
	if r.tools, err = r.p.cfg.Tools.withDeclared(cfg.Tools); err != nil {
		return err
	}

	// The conversation and its files in one call (convo.worker_prompt_read),
	// which looks for files only in a conversation that holds some.
	var read []wdb.WorkerPromptReadRow
	if err := r.call("read the conversation", func(ctx context.Context) (err error) {
		read, err = r.p.api.WorkerPromptRead(ctx, wdb.WorkerPromptReadParams{PromptID: r.claim.PromptID, Worker: r.worker})
		return err
	}); err != nil {
		return err
	}
	rows, fileRows := splitPromptRead(read)
	filePositions := map[uuid.UUID]int64{}
	for _, f := range fileRows {
		filePositions[f.MessageID] = f.MessagePosition
	}
	var messages []Message
	if cfg.SystemPrompt != "" {
		messages = append(messages, Message{Role: RoleSystem, Text: cfg.SystemPrompt})
	}
	messages = append(messages, historyMessages(rows, r.promptFiles(fileRows), filePositions)...)
	if r.claim.Resumed {
		// The prompt paused for input and was answered: the reply so far,
		// with the answers, is the model's context too. (Read once the
		// start is written: a prompt cancelled meanwhile reads nothing.)
		if err := r.w.sync(); err != nil {
			return err
		}
		own, err := r.resume()
		if err != nil {
			return err
		}
		messages = append(messages, own...)
	}

	if err := r.converse(model, Request{Config: cfg, Messages: messages, Tools: r.tools.Specs()}); err != nil {
		return err
	}
	return r.w.completePrompt(r.usage.json())
}

// call runs one SQL call outside the writer (a read), unless the prompt
// must stop.
func (r *run) call(what string, fn func(ctx context.Context) error) error {
	if r.ctx.Err() != nil {
		return context.Cause(r.ctx)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), r.p.cfg.CallTimeout)
	defer cancel()
	if err := fn(ctx); err != nil {
		return &writeError{what: what, err: err}
	}
	return nil
}

// converse runs the model, then its tool calls and the model again with
// their results, until it answers without calling tools.
func (r *run) converse(model Model, req Request) error {
	for {
		r.rounds++
		tr := newTranslator(r.w)
		tr.pause = r.pauseFor
		r.round = r.p.otel.startRound(r.ctx, req.Config, r.claim.ConversationID.String())
		err := r.stream(model, req, tr)
		r.round.end(tr.finish, tr.firstOutput, err)
		if err != nil {
			return err
		}
		r.usage = tr.finish.Usage.add(r.usage)
		switch tr.finish.Reason {
		case FinishError:
			msg := tr.finish.Error
			if msg == "" {
				msg = "the model failed without saying why"
			}
			return modelErrorf("%s", msg)
		case FinishCancelled:
			if r.ctx.Err() != nil {
				return context.Cause(r.ctx)
			}
			return modelErrorf("the model stopped: cancelled")
		}
		// Some providers finish with "stop" after tool calls: the calls
		// decide.
		if len(tr.calls) == 0 {
			return nil
		}
		if r.rounds > r.p.cfg.MaxToolRounds {
			return modelErrorf("the model asked for tools in more than %d rounds; stopped", r.p.cfg.MaxToolRounds)
		}
		assistant := Message{Role: RoleAssistant, Text: tr.answerText()}
		for _, c := range tr.calls {
			assistant.ToolCalls = append(assistant.ToolCalls, ToolCall{ID: c.id, Name: c.name, Arguments: c.arguments})
		}
		req.Messages = append(req.Messages, assistant)
		var paused []pausedCall
		for _, c := range tr.calls {
			if c.paused != nil {
				paused = append(paused, *c.paused)
				continue
			}
			result, err := r.runTool(c)
			if err != nil {
				return err
			}
			req.Messages = append(req.Messages, Message{Role: RoleTool, ToolCallID: c.id, ToolName: c.name, Text: result})
		}
		if len(paused) > 0 {
			// The prompt waits for a person, holding nothing: the worker
			// lets it go, and whoever claims it once answered resumes it.
			if err := r.w.wait(paused); err != nil {
				return err
			}
			return errWaiting
		}
	}
}

// streamItem is one value of a model's stream.
type streamItem struct {
	ev  Event
	err error
}

// stream runs one round of the model, translating its events as they come.
// The model runs in its own goroutine, so that the worker stops at once
// when the prompt must stop, even if the model is slow to notice.
func (r *run) stream(model Model, req Request, tr *translator) error {
	mctx, cancel := context.WithCancel(r.round.context(r.ctx))
	defer cancel()
	items := make(chan streamItem)
	go func() {
		defer close(items)
		defer func() {
			if v := recover(); v != nil {
				r.log.Error("model panicked", "panic", v, "stack", string(debug.Stack()))
				select {
				case items <- streamItem{err: fmt.Errorf("the model crashed: %v", v)}:
				case <-mctx.Done():
				}
			}
		}()
		for ev, err := range model.Stream(mctx, req) {
			select {
			case items <- streamItem{ev: ev, err: err}:
			case <-mctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	for {
		select {
		case <-r.ctx.Done():
			return context.Cause(r.ctx)
		case it, ok := <-items:
			if r.ctx.Err() != nil {
				return context.Cause(r.ctx)
			}
			if !ok {
				if tr.finish == nil {
					// A stream that simply ends has stopped.
					return tr.handle(Finish{Reason: FinishStop})
				}
				return nil
			}
			if it.err != nil {
				return &errModel{msg: it.err.Error()}
			}
			if _, ok := it.ev.(Part); ok && tr.firstOutput.IsZero() {
				tr.firstOutput = time.Now()
			}
			if err := tr.handle(it.ev); err != nil {
				return err
			}
		}
	}
}

// beat is one heartbeat outside the batches, when settling: true while
// the prompt is still ours.
func (r *run) beat() (bool, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), r.p.cfg.CallTimeout)
	defer cancel()
	keep, err := r.p.api.PromptHeartbeat(ctx, wdb.PromptHeartbeatParams{PromptID: r.claim.PromptID, Worker: r.worker})
	if err != nil {
		return false, fmt.Errorf("heartbeat: %w", err)
	}
	return keep, nil
}

// release hands a prompt claimed but never started back to the queue, so
// another worker takes it at once rather than when the lease expires.
func (r *run) release() {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), r.p.cfg.CallTimeout)
	defer cancel()
	released, err := r.p.api.PromptRelease(ctx, wdb.PromptReleaseParams{PromptID: r.claim.PromptID, Worker: r.worker})
	switch {
	case err != nil:
		r.log.Warn("release the prompt; it is claimable again when its lease expires", "err", err)
	case released:
		r.log.Info("released the prompt to the queue")
	}
}

// whyNotOurs is the outcome of a prompt a write found no longer ours: a
// cancellation can reach the database before its notification reaches
// this worker.
func (r *run) whyNotOurs(err error) (Outcome, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), r.p.cfg.CallTimeout)
	defer cancel()
	if status, serr := r.p.api.PromptStatus(ctx, wdb.PromptStatusParams{PromptID: r.claim.PromptID, Worker: r.worker}); serr == nil && status == "cancelled" {
		return OutcomeCancelled, errCancelled
	}
	return OutcomeStopped, err
}

// settle decides how the prompt ends after execute returned err, and
// writes that end when it is ours to write.
func (r *run) settle(err error) (Outcome, error) {
	if err == nil {
		return OutcomeCompleted, nil
	}
	if errors.Is(err, errWaiting) {
		return OutcomeWaiting, nil
	}
	if errors.Is(context.Cause(r.ctx), errShutdown) {
		// Wait for a batch in flight: it may be starting the prompt.
		_ = r.w.sync()
	}
	switch cause := context.Cause(r.ctx); {
	case errors.Is(cause, errCancelled):
		return OutcomeCancelled, cause
	case errors.Is(cause, errLost):
		return OutcomeStopped, cause
	case errors.Is(cause, errShutdown) && !r.w.isStarted():
		r.release()
		return OutcomeStopped, cause
	case errors.Is(cause, errShutdown):
		err = fmt.Errorf("worker %s stopped before the reply finished (shutting down)", r.worker)
	case cause == nil:
		// The model (or a check) failed, not the database: what it
		// streamed before the failure belongs to the partial reply.
		var we *writeError
		if !errors.As(err, &we) {
			if ferr := r.w.flushAll(); ferr != nil {
				r.log.Warn("write the text streamed before the failure", "err", ferr)
			}
		}
	}
	// The worker API refuses a write to a prompt that is not running, or
	// to an object it does not know: is the prompt still ours?
	if st := sqlstate.Of(err); st == sqlstate.IllegalState || st == sqlstate.NotFound {
		if keep, hbErr := r.beat(); hbErr == nil && !keep {
			return r.whyNotOurs(err)
		}
	}
	if !r.w.isStarted() {
		// Its start was never written (the batch failed): hand it back
		// to the queue if it is still ours, rather than fail a prompt
		// that another worker may hold by now.
		r.release()
		return OutcomeStopped, err
	}
	msg := err.Error()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), r.p.cfg.CallTimeout)
	defer cancel()
	if ferr := r.p.api.PromptFail(ctx, wdb.PromptFailParams{PromptID: r.claim.PromptID, Error: msg}); ferr != nil {
		if st := sqlstate.Of(ferr); st == sqlstate.IllegalState {
			// Cancelled or ended meanwhile: nothing more to write.
			return OutcomeStopped, err
		}
		r.log.Error("fail prompt", "err", ferr, "reason", msg)
	}
	return OutcomeFailed, err
}
