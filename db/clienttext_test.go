package db_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/db/sqlstate"
	"github.com/convo-dev/convo/internal/pgtest/apiq"
	"github.com/convo-dev/convo/postgres/dbq"
)

// TestClientAPIRefusesBlankTextAndSeparatedTitles calls the SQL client
// API, a door of its own, with a message text of only blank symbols
// (U+2800 BRAILLE PATTERN BLANK, U+1D159 MUSICAL SYMBOL NULL NOTEHEAD)
// and titles holding a line or paragraph separator (U+2028, U+2029) or
// only blanks: each is CV003 saying what is wrong, and changes nothing.
// A blank beside a visible character, in a text or a title, still passes.
func TestClientAPIRefusesBlankTextAndSeparatedTitles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	r := tb.sendMessage(t, uuid.Nil, "mine")
	configs := json.RawMessage(`[{}]`)
	send := func(text string) error {
		_, err := tb.api.MessageSend(ctx, apiq.MessageSendParams{OwnerID: "local", Text: text, ModelConfigs: configs})
		return err
	}
	const blankText, blankTitle, oneLine = "text must not be empty or only whitespace, control, zero-width, bidi control or blank",
		"title must not be empty or only whitespace, zero-width, bidi control or blank", "line or paragraph separators (U+2028, U+2029): a title is one line of text"
	for _, c := range []struct {
		name, message string
		call          func() error
	}{
		{"SendBraille", blankText, func() error { return send("\u2800\u2800\u2800") }},
		{"SendNullNotehead", blankText, func() error { return send(" \U0001D159 \u2800") }},
		{"EditBraille", blankText, func() error {
			_, err := tb.q.MessageEdit(ctx, dbq.MessageEditParams{OwnerID: "local", ConversationID: r.conversationID,
				MessageID: r.messageID, Text: "\u2800", ModelConfig: json.RawMessage(`{}`)})
			return err
		}},
		{"CreateTitleLineSeparator", oneLine, func() error {
			_, err := tb.q.ConversationCreate(ctx, dbq.ConversationCreateParams{OwnerID: "local", Title: "two\u2028lines"})
			return err
		}},
		{"CreateTitleBraille", blankTitle, func() error {
			_, err := tb.q.ConversationCreate(ctx, dbq.ConversationCreateParams{OwnerID: "local", Title: "\u2800"})
			return err
		}},
		{"RenameTitleParagraphSeparator", oneLine, func() error {
			return tb.q.ConversationRename(ctx, dbq.ConversationRenameParams{OwnerID: "local", ID: r.conversationID, Title: "one\u2029two"})
		}},
	} {
		before := tb.fingerprint(t)
		pgErr := requireSQLState(t, c.call(), sqlstate.InvalidArgument)
		if !strings.Contains(pgErr.Message, c.message) {
			t.Errorf("%s: %q does not say %q", c.name, pgErr.Message, c.message)
		}
		if after := tb.fingerprint(t); after != before {
			t.Errorf("%s: the refused call changed state:\nbefore %s\nafter  %s", c.name, before, after)
		}
	}
	if err := send("\u2800ok\u2800"); err != nil {
		t.Errorf("a text with a visible character among blanks: %v", err)
	}
	if err := tb.q.ConversationRename(ctx, dbq.ConversationRenameParams{OwnerID: "local", ID: r.conversationID, Title: "\u2800 Plans"}); err != nil {
		t.Errorf("a title with a visible character beside a blank: %v", err)
	}
}
