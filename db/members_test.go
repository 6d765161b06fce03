package db_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// TestMembersSQL: the client functions called as the server calls them,
// by the conversation's owner ("local"), a participant, a viewer, a
// removed member and a stranger: the owner and participants write, a
// viewer's write is CV005 naming the role, owner-only functions are CV005
// for every member, and a removed member's or a stranger's call is CV001
// as for a conversation that does not exist. Every refusal changes
// nothing (every row a call can touch, the members included).
func TestMembersSQL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	// conv makes a conversation of "local" with a completed reply and
	// its members: pat a participant, vic a viewer, rex removed.
	conv := func(t *testing.T) (convID, userMsg, reply uuid.UUID) {
		t.Helper()
		r := tb.sendMessage(t, uuid.Nil, "shared")
		tb.complete(t, r.promptID, "a reply")
		for user, role := range map[string]string{"pat": "participant", "vic": "viewer", "rex": "participant"} {
			if _, err := tb.pool.Exec(ctx, `SELECT convo.add_member('local', $1, $2, $3)`, r.conversationID, user, role); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := tb.pool.Exec(ctx, `SELECT convo.remove_member('local', $1, 'rex')`, r.conversationID); err != nil {
			t.Fatal(err)
		}
		if err := tb.pool.QueryRow(ctx, `SELECT parent_id FROM convo.messages WHERE id = $1`, r.messageID).Scan(&userMsg); err != nil {
			t.Fatal(err)
		}
		return r.conversationID, userMsg, r.messageID
	}
	members := func(t *testing.T) string {
		var s string
		if err := tb.pool.QueryRow(ctx, `SELECT coalesce(string_agg(conversation_id::text || user_id || role, ',' ORDER BY conversation_id, user_id), '') FROM convo.members`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	type level int
	const (
		read level = iota
		write
		owner
	)
	for _, c := range []struct {
		name  string
		level level
		sql   string // after a's row: u the caller, c the conversation, m the user message, r the reply
	}{
		{"send_message", write, `SELECT s.* FROM a, convo.send_message(a.u, a.c, 'hi', '[{}]') s`},
		{"edit_message", write, `SELECT e.* FROM a, convo.edit_message(a.u, a.c, a.m, 'edited', NULL) e`},
		{"regenerate_reply", write, `SELECT g.* FROM a, convo.regenerate_reply(a.u, a.c, a.r, NULL) g`},
		{"switch_branch", write, `SELECT convo.switch_branch(a.u, a.c, a.m) FROM a`},
		{"switch_version", write, `SELECT convo.switch_version(a.u, a.c, a.m, 0) FROM a`},
		{"set_feedback", write, `SELECT convo.set_feedback(a.u, a.r, 'up', '') FROM a`},
		{"append_messages", write, `SELECT convo.append_messages(a.u, a.c, '[{"role": "user", "text": "more"}]') FROM a`},
		{"rename_conversation", owner, `SELECT convo.rename_conversation(a.u, a.c, 'renamed') FROM a`},
		{"clear_conversation", owner, `SELECT convo.clear_conversation(a.u, a.c) FROM a`},
		{"delete_conversation", owner, `SELECT convo.delete_conversation(a.u, a.c) FROM a`},
		{"add_member", owner, `SELECT convo.add_member(a.u, a.c, 'newcomer', 'viewer') FROM a`},
		{"remove_member", owner, `SELECT convo.remove_member(a.u, a.c, CASE WHEN a.u = 'pat' THEN 'vic' ELSE 'pat' END) FROM a`},
		{"member_role", read, `SELECT 1 FROM a WHERE convo.member_role(a.u, a.c) IS NOT NULL`},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, user := range []string{"local", "pat", "vic", "rex", "sam"} {
				id, userMsg, reply := conv(t)
				var want string // "" allowed, else the SQLSTATE
				switch {
				case user == "rex" || user == "sam":
					want = "CV001"
				case user == "vic" && c.level != read, user == "pat" && c.level == owner:
					want = "CV005"
				}
				before, beforeMembers := tb.fingerprint(t), members(t)
				rows, err := tb.pool.Query(ctx, `WITH a AS (SELECT $1::text AS u, $2::uuid AS c, $3::uuid AS m, $4::uuid AS r) `+c.sql, user, id, userMsg, reply)
				n := 0
				if err == nil {
					for rows.Next() {
						n++
					}
					err = rows.Err()
				}
				if c.level == read {
					// member_role: a row for a role, none for no role.
					if got := n == 1; got != (want == "") || err != nil {
						t.Errorf("%s: member_role found=%v (%v)", user, got, err)
					}
					continue
				}
				if want == "" {
					if err != nil {
						t.Errorf("%s: %v", user, err)
					}
					continue
				}
				e := requireSQLState(t, err, want)
				if want == "CV005" && !strings.Contains(e.Message, map[string]string{"pat": "a participant may not", "vic": "a viewer may not"}[user]) {
					t.Errorf("%s: %q does not name the role", user, e.Message)
				}
				if want == "CV001" && !strings.Contains(e.Message, "does not exist") {
					t.Errorf("%s: %q", user, e.Message)
				}
				if tb.fingerprint(t) != before || members(t) != beforeMembers {
					t.Errorf("%s: %s was refused (%s) and changed something", user, c.name, want)
				}
			}
		})
	}
}

// TestMembersSenderAndQuota: a participant's message records its sender
// (messages.sender_id and the event's senderId), and its prompt counts
// against the conversation owner's cap, not the participant's.
func TestMembersSenderAndQuota(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	r := tb.sendMessage(t, uuid.Nil, "first")
	if _, err := tb.pool.Exec(ctx, `SELECT convo.add_member('local', $1, 'pat', 'participant')`, r.conversationID); err != nil {
		t.Fatal(err)
	}
	var msg uuid.UUID
	if err := tb.pool.QueryRow(ctx, `SELECT user_message_id FROM convo.send_message('pat', $1, 'from pat', '[{}]')`, r.conversationID).Scan(&msg); err != nil {
		t.Fatal(err)
	}
	var sender, eventSender string
	err := tb.pool.QueryRow(ctx, `SELECT m.sender_id, e.payload #>> '{message,senderId}'
		FROM convo.messages m
		JOIN convo.events e ON e.conversation_id = m.conversation_id AND e.kind = 'messageCreated'
		                   AND e.payload #>> '{message,id}' = m.id::text
		WHERE m.id = $1`, msg).Scan(&sender, &eventSender)
	if err != nil || sender != "pat" || eventSender != "pat" {
		t.Fatalf("sender_id %q, event's senderId %q (%v); want pat", sender, eventSender, err)
	}
	var owners string
	if err := tb.pool.QueryRow(ctx, `SELECT string_agg(DISTINCT owner_id, ',') FROM convo.prompts WHERE conversation_id = $1`, r.conversationID).Scan(&owners); err != nil || owners != "local" {
		t.Fatalf("the prompts' owners = %q (%v), want local", owners, err)
	}
	// local's cap is 2, both taken: pat's send is refused for local's cap.
	tb.setCap(t, 2)
	before := tb.fingerprint(t)
	_, err = tb.send(ctx, "pat", r.conversationID, 1)
	requireQuotaExceeded(t, err)
	if tb.fingerprint(t) != before {
		t.Error("a refused send changed something")
	}
}
