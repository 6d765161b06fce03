-- +goose Up

-- Everything convo owns lives in the schema "convo": its tables, and the
-- worker API functions (00002_worker_api.sql) that workers in any language
-- call to write replies.
CREATE SCHEMA convo;

-- A conversation is a thread owned by one user. last_seq is the conversation's
-- event counter: every change appends one event with seq = last_seq + 1 while
-- holding this row's lock, so the events of one conversation commit in seq
-- order with no gaps (see convo._append_event).
CREATE TABLE convo.conversations (
    id               uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    owner_id         text        NOT NULL CHECK (owner_id <> ''),
    title            text        NOT NULL DEFAULT '' CHECK (length(title) <= 200),
    active_prompt_id uuid,
    last_seq         bigint      NOT NULL DEFAULT 0,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    last_message_at  timestamptz NOT NULL DEFAULT now()
) WITH (fillfactor = 80); -- room for HOT updates of last_seq, once per event

CREATE INDEX conversations_owner_recent_idx
    ON convo.conversations (owner_id, last_message_at DESC, id DESC);

-- A message is one turn. position orders the messages of a conversation:
-- it is taken from the conversation's seq when the message is created.
CREATE TABLE convo.messages (
    id              uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    conversation_id uuid        NOT NULL REFERENCES convo.conversations (id) ON DELETE CASCADE,
    position        bigint      NOT NULL,
    role            text        NOT NULL CHECK (role IN ('user', 'assistant', 'system')),
    status          text        NOT NULL CHECK (status IN ('pending', 'processing', 'completed', 'failed', 'cancelled')),
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (conversation_id, position)
);

-- A prompt is one generation run that fills one assistant message; it is
-- also the unit of a trace (trace id = prompt id). A worker claims a queued
-- prompt (worker, lease_expires_at), starts it (running), and ends it.
CREATE TABLE convo.prompts (
    id               uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    conversation_id  uuid        NOT NULL REFERENCES convo.conversations (id) ON DELETE CASCADE,
    message_id       uuid        NOT NULL UNIQUE REFERENCES convo.messages (id) ON DELETE CASCADE,
    status           text        NOT NULL DEFAULT 'queued'
                                 CHECK (status IN ('queued', 'running', 'completed', 'failed', 'cancelled')),
    model_config     jsonb       NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(model_config) = 'object'),
    worker           text,
    lease_seconds    integer,
    lease_expires_at timestamptz,
    attempts         integer     NOT NULL DEFAULT 0,
    error            text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    started_at       timestamptz,
    ended_at         timestamptz
);

-- The queue: claim_prompt scans queued prompts oldest first.
CREATE INDEX prompts_queued_idx ON convo.prompts (created_at) WHERE status = 'queued';
-- The reaper: running prompts by lease expiry.
CREATE INDEX prompts_running_lease_idx ON convo.prompts (lease_expires_at) WHERE status = 'running';
CREATE INDEX prompts_conversation_idx ON convo.prompts (conversation_id, created_at);

-- A block is an ordered piece of a message. While it streams (status
-- 'streaming') its text lives only in its blockDelta events, one row per
-- delta, so appending never rewrites what is already there; end_block
-- concatenates the deltas into content once.
CREATE TABLE convo.blocks (
    id              uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    conversation_id uuid        NOT NULL REFERENCES convo.conversations (id) ON DELETE CASCADE,
    message_id      uuid        NOT NULL REFERENCES convo.messages (id) ON DELETE CASCADE,
    prompt_id       uuid        REFERENCES convo.prompts (id) ON DELETE CASCADE,
    position        integer     NOT NULL,
    block_type      text        NOT NULL CHECK (block_type ~ '^[a-z][a-z0-9_]{0,63}$'),
    status          text        NOT NULL CHECK (status IN ('streaming', 'completed')),
    content         text        NOT NULL DEFAULT '',
    metadata        jsonb       NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(metadata) = 'object'),
    -- delta_count counts append_block calls, so a worker that retries an
    -- append whose reply it lost (passing delta_seq) is not applied twice.
    delta_count     integer     NOT NULL DEFAULT 0,
    created_at      timestamptz NOT NULL DEFAULT now(),
    ended_at        timestamptz,
    UNIQUE (message_id, position)
);

CREATE INDEX blocks_conversation_idx ON convo.blocks (conversation_id);

-- A tool call belongs to one tool_use block. While it runs its output lives
-- in its toolCallProgress events; it is concatenated into output when the
-- call ends.
CREATE TABLE convo.tool_calls (
    id              uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    conversation_id uuid        NOT NULL REFERENCES convo.conversations (id) ON DELETE CASCADE,
    block_id        uuid        NOT NULL UNIQUE REFERENCES convo.blocks (id) ON DELETE CASCADE,
    prompt_id       uuid        NOT NULL REFERENCES convo.prompts (id) ON DELETE CASCADE,
    name            text        NOT NULL CHECK (name <> ''),
    input           jsonb       NOT NULL,
    status          text        NOT NULL CHECK (status IN ('started', 'running', 'completed', 'failed')),
    output          text        NOT NULL DEFAULT '',
    error           text,
    started_at      timestamptz NOT NULL DEFAULT now(),
    ended_at        timestamptz
);

CREATE INDEX tool_calls_conversation_idx ON convo.tool_calls (conversation_id);

-- The event log: one row per committed change of a conversation, numbered
-- 1, 2, 3 … per conversation with no gaps. It is the single source of every
-- stream event, of traces and of resume. payload is the event's body in the
-- proto3 JSON form of the Connect API (docs/events.md).
CREATE TABLE convo.events (
    conversation_id uuid        NOT NULL REFERENCES convo.conversations (id) ON DELETE CASCADE,
    seq             bigint      NOT NULL,
    kind            text        NOT NULL,
    prompt_id       uuid,
    block_id        uuid,
    tool_call_id    uuid,
    payload         jsonb       NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (conversation_id, seq)
);

-- The text of a streaming block, and the output of a running tool call, are
-- read back from their delta events.
CREATE INDEX events_block_delta_idx ON convo.events (block_id, seq) WHERE kind = 'blockDelta';
CREATE INDEX events_tool_progress_idx ON convo.events (tool_call_id, seq) WHERE kind = 'toolCallProgress';
-- Traces: the events of one prompt.
CREATE INDEX events_prompt_idx ON convo.events (prompt_id, seq) WHERE prompt_id IS NOT NULL;

-- +goose Down
DROP SCHEMA convo CASCADE;
