-- +goose Up

-- The replies deleted through OpenAI's Responses API (DELETE
-- /v1/responses/{id}, docs/openai.md): the API's reads answer a prompt
-- here as not found, while its conversation's messages stay, as an
-- OpenAI conversation's items stay when a response is deleted. Written
-- by convo.delete_response; a deleted conversation takes its rows along.
CREATE TABLE convo.deleted_responses (
    prompt_id  uuid        PRIMARY KEY REFERENCES convo.prompts (id) ON DELETE CASCADE,
    deleted_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP FUNCTION IF EXISTS convo.delete_response(text, uuid);
DROP TABLE convo.deleted_responses;
