-- +goose Up

-- OpenAI's Responses API takes input files and images (docs/openai.md):
-- convo.send_after takes a last argument, p_file_ids (DEFAULT '{}', so
-- that calls without it mean what they meant), the files the user
-- message holds. A function's signature cannot change with CREATE OR
-- REPLACE: the old one is dropped here, and db/functions/client_api.sql
-- holds the current definition (applied after the migrations on every
-- start).
DROP FUNCTION IF EXISTS convo.send_after(text, uuid, uuid, text, jsonb);

-- Workers report a reply's token usage (docs/worker-api.md):
-- convo.complete_prompt takes usage (DEFAULT NULL), and _finish_prompt
-- p_usage, kept in the promptCompleted event.
DROP FUNCTION IF EXISTS convo.complete_prompt(uuid);
DROP FUNCTION IF EXISTS convo._finish_prompt(uuid, text, text);

-- +goose Down
DROP FUNCTION IF EXISTS convo.complete_prompt(uuid, jsonb);
DROP FUNCTION IF EXISTS convo._finish_prompt(uuid, text, text, jsonb);
DROP FUNCTION IF EXISTS convo.send_after(text, uuid, uuid, text, jsonb, uuid[]);
