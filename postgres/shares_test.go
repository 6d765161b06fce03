package postgres_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
)

// sharedConv creates a conversation of "local" and sends text to it.
func sharedConv(t *testing.T, tb *testBundle, text string) reply {
	t.Helper()
	c, err := tb.store.CreateConversation(context.Background(), "local", "")
	if err != nil {
		t.Fatal(err)
	}
	return tb.sendMessage(t, c.ID, text)
}

// shareState is what a refused share call must leave as it was.
func shareState(t *testing.T, tb *testBundle, conv uuid.UUID) (shares int, lastSeq int64) {
	t.Helper()
	err := tb.pool.QueryRow(context.Background(),
		`SELECT (SELECT count(*) FROM convo.shares WHERE conversation_id = $1),
		        (SELECT last_seq FROM convo.conversations WHERE id = $1)`, conv).Scan(&shares, &lastSeq)
	if err != nil {
		t.Fatal(err)
	}
	return shares, lastSeq
}

func wantCode(t *testing.T, err error, code conversation.Code, what string) {
	t.Helper()
	if conversation.ErrorCode(err) != code {
		t.Fatalf("%s: got %v, want %s", what, err, code)
	}
}

// TestShareTokenStoredAsHash: CreateShare returns a 43-character
// base64url token of 32 random bytes, stores only its SHA-256, and the
// token opens the share; the share's leaf is the active leaf.
func TestShareTokenStoredAsHash(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	r := sharedConv(t, tb, "hello")
	sh, token, err := tb.store.CreateShare(ctx, conversation.CreateShareParams{
		CallerID: "local", ConversationID: r.conversationID, Mode: conversation.ShareSnapshot})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(raw) != 32 || len(token) != 43 {
		t.Fatalf("token %q: %d bytes, %v", token, len(raw), err)
	}
	if sh.LeafMessageID != r.messageID || sh.Mode != conversation.ShareSnapshot || sh.CreatedBy != "local" || sh.IncludeTools {
		t.Fatalf("share %+v, want leaf %s (the active leaf)", sh, r.messageID)
	}
	var stored []byte
	if err := tb.pool.QueryRow(ctx, `SELECT token_hash FROM convo.shares WHERE id = $1`, sh.ID).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(token))
	if !bytes.Equal(stored, sum[:]) {
		t.Fatalf("stored %x, want sha256(token) %x", stored, sum)
	}
	got, err := tb.store.ShareByToken(ctx, token)
	if err != nil || got.ID != sh.ID {
		t.Fatalf("ShareByToken: %+v, %v", got, err)
	}
	_, other, err := tb.store.CreateShare(ctx, conversation.CreateShareParams{
		CallerID: "local", ConversationID: r.conversationID, Mode: conversation.ShareLive})
	if err != nil || other == token {
		t.Fatalf("second token %q (first %q): %v", other, token, err)
	}
}

// TestShareEndsAlike: a revoked, an expired and an unknown token all
// answer NotFound with the same message.
func TestShareEndsAlike(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	r := sharedConv(t, tb, "hello")
	mk := func() (conversation.Share, string) {
		sh, token, err := tb.store.CreateShare(ctx, conversation.CreateShareParams{
			CallerID: "local", ConversationID: r.conversationID, Mode: conversation.ShareLive})
		if err != nil {
			t.Fatal(err)
		}
		return sh, token
	}
	revoked, revokedToken := mk()
	out, err := tb.store.RevokeShare(ctx, "local", revoked.ID)
	if err != nil || out.RevokedAt == nil {
		t.Fatalf("revoke: %+v, %v", out, err)
	}
	expired, expiredToken := mk()
	if _, err := tb.pool.Exec(ctx, `UPDATE convo.shares SET expires_at = now() - interval '1 second' WHERE id = $1`, expired.ID); err != nil {
		t.Fatal(err)
	}
	var msgs []string
	for _, token := range []string{revokedToken, expiredToken, "no-such-token"} {
		_, err := tb.store.ShareByToken(ctx, token)
		wantCode(t, err, conversation.NotFound, "a share no longer in force")
		msgs = append(msgs, conversation.ErrorMessage(err))
	}
	if msgs[0] != msgs[1] || msgs[1] != msgs[2] || !strings.Contains(msgs[0], "share does not exist") {
		t.Fatalf("messages differ or say too much: %q", msgs)
	}
	// A second revoke changes nothing and writes no event.
	_, seq := shareState(t, tb, r.conversationID)
	again, err := tb.store.RevokeShare(ctx, "local", revoked.ID)
	if err != nil || again.RevokedAt == nil || !again.RevokedAt.Equal(*out.RevokedAt) {
		t.Fatalf("second revoke: %+v, %v", again, err)
	}
	if _, seq2 := shareState(t, tb, r.conversationID); seq2 != seq {
		t.Fatalf("second revoke wrote events: seq %d -> %d", seq, seq2)
	}
}

// TestShareRoles: the owner and participants create and list shares; a
// viewer is PermissionDenied, a stranger NotFound; a participant revokes
// its own share but not the owner's, the owner any; a stranger's revoke
// is NotFound.
func TestShareRoles(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	r := sharedConv(t, tb, "hello")
	conv := r.conversationID
	if _, err := tb.store.AddMember(ctx, "local", conv, "pat", conversation.RoleParticipant); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.store.AddMember(ctx, "local", conv, "vic", conversation.RoleViewer); err != nil {
		t.Fatal(err)
	}
	create := func(user string) (conversation.Share, error) {
		sh, _, err := tb.store.CreateShare(ctx, conversation.CreateShareParams{
			CallerID: user, ConversationID: conv, Mode: conversation.ShareSnapshot})
		return sh, err
	}
	ownerShare, err := create("local")
	if err != nil {
		t.Fatal(err)
	}
	patShare, err := create("pat")
	if err != nil {
		t.Fatal(err)
	}
	n, seq := shareState(t, tb, conv)
	_, err = create("vic")
	wantCode(t, err, conversation.PermissionDenied, "a viewer's CreateShare")
	_, err = create("eve")
	wantCode(t, err, conversation.NotFound, "a stranger's CreateShare")
	_, err = tb.store.ListShares(ctx, "vic", conv)
	wantCode(t, err, conversation.PermissionDenied, "a viewer's ListShares")
	_, err = tb.store.ListShares(ctx, "eve", conv)
	wantCode(t, err, conversation.NotFound, "a stranger's ListShares")
	_, err = tb.store.RevokeShare(ctx, "pat", ownerShare.ID)
	wantCode(t, err, conversation.PermissionDenied, "a participant revoking the owner's share")
	_, err = tb.store.RevokeShare(ctx, "eve", ownerShare.ID)
	wantCode(t, err, conversation.NotFound, "a stranger's RevokeShare")
	_, err = tb.store.RevokeShare(ctx, "local", uuid.New())
	wantCode(t, err, conversation.NotFound, "RevokeShare of an unknown share")
	if n2, seq2 := shareState(t, tb, conv); n2 != n || seq2 != seq {
		t.Fatalf("refusals changed something: shares %d -> %d, seq %d -> %d", n, n2, seq, seq2)
	}
	list, err := tb.store.ListShares(ctx, "pat", conv)
	if err != nil || len(list) != 2 || list[0].ID != patShare.ID || list[1].ID != ownerShare.ID {
		t.Fatalf("ListShares (newest first): %+v, %v", list, err)
	}
	if _, err := tb.store.RevokeShare(ctx, "pat", patShare.ID); err != nil {
		t.Fatalf("a participant revoking its own share: %v", err)
	}
	if _, err := tb.store.RevokeShare(ctx, "local", ownerShare.ID); err != nil {
		t.Fatalf("the owner revoking: %v", err)
	}
}

// TestShareRefused: a bad mode, an expiry in the past or too far ahead, a
// leaf of another conversation, a snapshot of an empty conversation and
// the 101st share in force are refused, naming what was wrong, and
// change nothing.
func TestShareRefused(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	r := sharedConv(t, tb, "hello")
	other := sharedConv(t, tb, "elsewhere")
	empty, err := tb.store.CreateConversation(ctx, "local", "")
	if err != nil {
		t.Fatal(err)
	}
	past, far := time.Now().Add(-time.Minute), time.Now().Add(400*24*time.Hour)
	for _, c := range []struct {
		name string
		p    conversation.CreateShareParams
		code conversation.Code
		says string
	}{
		{"bad mode", conversation.CreateShareParams{ConversationID: r.conversationID, Mode: "public"}, conversation.Invalid, "mode"},
		{"expiry past", conversation.CreateShareParams{ConversationID: r.conversationID, Mode: conversation.ShareLive, ExpiresAt: &past}, conversation.Invalid, "expiresAt"},
		{"expiry far", conversation.CreateShareParams{ConversationID: r.conversationID, Mode: conversation.ShareLive, ExpiresAt: &far}, conversation.Invalid, "366 days"},
		{"foreign leaf", conversation.CreateShareParams{ConversationID: r.conversationID, Mode: conversation.ShareSnapshot, LeafMessageID: other.messageID}, conversation.NotFound, "leafMessageId"},
		{"empty snapshot", conversation.CreateShareParams{ConversationID: empty.ID, Mode: conversation.ShareSnapshot}, conversation.Invalid, "no message"},
	} {
		c.p.CallerID = "local"
		n, seq := shareState(t, tb, c.p.ConversationID)
		_, _, err := tb.store.CreateShare(ctx, c.p)
		wantCode(t, err, c.code, c.name)
		if !strings.Contains(conversation.ErrorMessage(err), c.says) {
			t.Errorf("%s: %q does not say %q", c.name, conversation.ErrorMessage(err), c.says)
		}
		if n2, seq2 := shareState(t, tb, c.p.ConversationID); n2 != n || seq2 != seq {
			t.Errorf("%s changed something: shares %d -> %d, seq %d -> %d", c.name, n, n2, seq, seq2)
		}
	}
	// A live share of an empty conversation has no leaf.
	sh, _, err := tb.store.CreateShare(ctx, conversation.CreateShareParams{CallerID: "local", ConversationID: empty.ID, Mode: conversation.ShareLive})
	if err != nil || sh.LeafMessageID != uuid.Nil {
		t.Fatalf("live share of an empty conversation: %+v, %v", sh, err)
	}
	// The limit counts shares in force: a revoked one frees a place.
	var first conversation.Share
	for i := range conversation.MaxSharesInForce {
		s, _, err := tb.store.CreateShare(ctx, conversation.CreateShareParams{CallerID: "local", ConversationID: r.conversationID, Mode: conversation.ShareLive})
		if err != nil {
			t.Fatalf("share %d: %v", i+1, err)
		}
		if i == 0 {
			first = s
		}
	}
	n, seq := shareState(t, tb, r.conversationID)
	_, _, err = tb.store.CreateShare(ctx, conversation.CreateShareParams{CallerID: "local", ConversationID: r.conversationID, Mode: conversation.ShareLive})
	wantCode(t, err, conversation.ResourceExhausted, "the 101st share")
	if n2, seq2 := shareState(t, tb, r.conversationID); n2 != n || seq2 != seq {
		t.Fatalf("the 101st share changed something")
	}
	if _, err := tb.store.RevokeShare(ctx, "local", first.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tb.store.CreateShare(ctx, conversation.CreateShareParams{CallerID: "local", ConversationID: r.conversationID, Mode: conversation.ShareLive}); err != nil {
		t.Fatalf("a share after one was revoked: %v", err)
	}
}
