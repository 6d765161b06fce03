-- +goose Up

-- Replies share transactions. A worker process that streams many replies at
-- once writes the pending output of all of them in one call of
-- convo.write_batch per tick (db/functions/batch.sql, docs/worker-api.md):
-- one transaction, one notification per conversation, instead of one
-- transaction per delta per reply.
--
-- convo.worker_batches remembers, per worker and lane (a worker may write
-- batches on several connections at once, each its own lane), the number
-- of the last batch write_batch applied and which of its prompts it
-- refused. A worker that
-- lost the answer to a call (the connection broke around the commit) sends
-- the same batch again: write_batch finds its number here and answers as
-- the first time, applying nothing twice. One row per worker and lane;
-- write_batch deletes the rows of workers silent for a day when a new
-- worker writes its first batch.
CREATE TABLE convo.worker_batches (
    worker     text        NOT NULL CHECK (worker <> ''),
    lane       integer     NOT NULL CHECK (lane >= 0),
    batch      bigint      NOT NULL,
    refused    jsonb       NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(refused) = 'array'),
    written_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (worker, lane)
);

-- start_block and start_tool_call become wrappers of _start_block and
-- _start_tool_call, which take the new object's id from the caller
-- (db/functions/worker_api.sql); their signatures are unchanged.

-- +goose Down
DROP TABLE convo.worker_batches;
