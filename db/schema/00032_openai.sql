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

-- The metadata OpenAI's Conversations API keeps on a conversation
-- (POST /v1/conversations, docs/openai.md): at most 16 string pairs,
-- checked by the API. A conversation without a row has none.
CREATE TABLE convo.conversation_metadata (
    conversation_id uuid  PRIMARY KEY REFERENCES convo.conversations (id) ON DELETE CASCADE,
    metadata        jsonb NOT NULL CHECK (jsonb_typeof(metadata) = 'object')
);

-- +goose Down
DROP FUNCTION IF EXISTS convo.delete_response(text, uuid);
DROP TABLE convo.conversation_metadata;
DROP TABLE convo.deleted_responses;
