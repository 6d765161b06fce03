-- +goose Up

-- convo.switch_version (SwitchBranch with a sibling_index: show version n
-- of a turn) is defined in db/functions/client_api.sql, which db.Migrate
-- applies after the migrations; no table changes.
SELECT 1;

-- +goose Down
DROP FUNCTION IF EXISTS convo.switch_version(text, uuid, uuid, integer);
