package stream

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pglogrepl"

	"github.com/convo-dev/convo/conversation"
)

// pgoutput messages (protocol version 1), built as the server sends them.

func pgString(b []byte, s string) []byte { return append(append(b, s...), 0) }

func relationMsg(id uint32, namespace, name string, columns ...string) []byte {
	b := binary.BigEndian.AppendUint32([]byte{'R'}, id)
	b = pgString(pgString(b, namespace), name)
	b = append(b, 'd')
	b = binary.BigEndian.AppendUint16(b, uint16(len(columns)))
	for _, c := range columns {
		b = append(pgString(append(b, 0), c), 0, 0, 0, 25, 0xff, 0xff, 0xff, 0xff)
	}
	return b
}

// tuple encodes values; nil is NULL.
func tuple(values ...*string) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(len(values)))
	for _, v := range values {
		if v == nil {
			b = append(b, 'n')
			continue
		}
		b = binary.BigEndian.AppendUint32(append(b, 't'), uint32(len(*v)))
		b = append(b, *v...)
	}
	return b
}

func insertMsg(relation uint32, values ...*string) []byte {
	return append(append(binary.BigEndian.AppendUint32([]byte{'I'}, relation), 'N'), tuple(values...)...)
}

func deleteMsg(relation uint32, values ...*string) []byte {
	return append(append(binary.BigEndian.AppendUint32([]byte{'D'}, relation), 'K'), tuple(values...)...)
}

func beginMsg() []byte { return append([]byte{'B'}, make([]byte, 8+8+4)...) }

func commitMsg(end uint64) []byte {
	b := append([]byte{'C'}, 0)
	b = binary.BigEndian.AppendUint64(b, end-1)
	b = binary.BigEndian.AppendUint64(b, end)
	return binary.BigEndian.AppendUint64(b, 0)
}

func text(s string) *string { return &s }

func TestPgoutputDecoder(t *testing.T) {
	t.Parallel()
	conv, block := uuid.New(), uuid.New()
	decode := func(t *testing.T, d *pgoutputDecoder, msgs ...[]byte) *walTx {
		t.Helper()
		var tx *walTx
		for _, m := range msgs {
			got, err := d.decode(m)
			if err != nil {
				t.Fatalf("decode %c: %v", m[0], err)
			}
			if got != nil {
				tx = got
			}
		}
		return tx
	}

	t.Run("EventRowsInAnyColumnOrder", func(t *testing.T) {
		t.Parallel()
		d := newPgoutputDecoder()
		// Columns as a later migration might leave them: reordered, one
		// more.
		tx := decode(t, d,
			relationMsg(7, "convo", "events", "payload", "extra", "created_at", "seq", "kind", "tool_call_id",
				"block_id", "prompt_id", "conversation_id"),
			beginMsg(),
			insertMsg(7, text(`{"content": "日本 🙂"}`), text("x"), text("2026-11-22 04:23:47.123456+00"), text("42"),
				text("blockDelta"), nil, text(block.String()), nil, text(conv.String())),
			commitMsg(1000))
		if tx == nil || len(tx.events) != 1 || tx.end != pglogrepl.LSN(1000) {
			t.Fatalf("transaction = %+v", tx)
		}
		want := conversation.Event{
			ConversationID: conv, Seq: 42, Kind: "blockDelta",
			BlockID: uuid.NullUUID{UUID: block, Valid: true}, Payload: []byte(`{"content": "日本 🙂"}`),
			CreatedAt: time.Date(2026, 11, 22, 4, 23, 47, 123456000, time.UTC),
		}
		got := tx.events[0]
		if got.ConversationID != want.ConversationID || got.Seq != want.Seq || got.Kind != want.Kind ||
			got.BlockID != want.BlockID || got.PromptID.Valid || got.ToolCallID.Valid ||
			string(got.Payload) != string(want.Payload) || !got.CreatedAt.Equal(want.CreatedAt) {
			t.Errorf("event = %+v\nwant    %+v", got, want)
		}
	})

	t.Run("DeletedConversationsAndOtherTables", func(t *testing.T) {
		t.Parallel()
		d := newPgoutputDecoder()
		tx := decode(t, d,
			relationMsg(8, "convo", "conversations", "id", "owner_id"),
			relationMsg(9, "public", "events", "conversation_id"),
			beginMsg(),
			insertMsg(9, text(conv.String())),
			deleteMsg(8, text(conv.String()), nil),
			commitMsg(2000))
		if len(tx.events) != 0 || len(tx.deleted) != 1 || tx.deleted[0] != conv {
			t.Fatalf("transaction = %+v; want only the deletion", tx)
		}
	})

	t.Run("UnreadableRowIsReadFromTheLog", func(t *testing.T) {
		t.Parallel()
		d := newPgoutputDecoder()
		cols := []string{"conversation_id", "seq", "kind", "prompt_id", "block_id", "tool_call_id", "payload", "created_at"}
		tx := decode(t, d,
			relationMsg(7, "convo", "events", cols...),
			beginMsg(),
			insertMsg(7, text(conv.String()), text("not a number"), text("k"), nil, nil, nil, text("{}"), text("2026-11-22 04:23:47+00")),
			commitMsg(3000))
		if len(tx.events) != 0 || len(tx.unreadable) != 1 || tx.unreadable[0].conversationID != conv {
			t.Fatalf("transaction = %+v; want the row marked unreadable", tx)
		}
	})

	t.Run("BrokenStreams", func(t *testing.T) {
		t.Parallel()
		for name, msgs := range map[string][][]byte{
			"UnknownRelation":   {beginMsg(), insertMsg(99, text("x"))},
			"ChangeOutsideTx":   {relationMsg(7, "convo", "conversations", "id"), deleteMsg(7, text(conv.String()))},
			"CommitWithoutTx":   {commitMsg(10)},
			"EventsLackAColumn": {relationMsg(7, "convo", "events", "conversation_id", "seq")},
			"Truncated":         {relationMsg(7, "convo", "conversations", "id"), beginMsg(), deleteMsg(7, text(conv.String()))[:12]},
		} {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				d := newPgoutputDecoder()
				var err error
				for _, m := range msgs {
					if _, err = d.decode(m); err != nil {
						break
					}
				}
				if err == nil {
					t.Fatal("decoded without an error")
				}
			})
		}
	})
}
