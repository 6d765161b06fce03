package stream

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/convo-dev/convo/conversation"
)

// walTx is what one committed transaction carries for the hub.
type walTx struct {
	events  []conversation.Event
	deleted []uuid.UUID
	// unreadable are event rows that could not be decoded: the hub reads
	// their conversations from the log instead.
	unreadable []unreadableRow
	// end is the LSN just after the transaction's commit.
	end pglogrepl.LSN
}

type unreadableRow struct {
	conversationID uuid.UUID
	err            error
}

// pgoutputDecoder turns the messages of pgoutput (protocol version 1, text
// values) into walTx, one per committed transaction that touched the
// published tables. It is not safe for concurrent use; one belongs to one
// replication session, since relation ids are announced per session.
type pgoutputDecoder struct {
	relations map[uint32]*relation
	types     *pgtype.Map
	tx        *walTx // nil outside a transaction
}

func newPgoutputDecoder() *pgoutputDecoder {
	return &pgoutputDecoder{relations: make(map[uint32]*relation), types: pgtype.NewMap()}
}

// relation is a published table as a Relation message describes it.
type relation struct {
	name string
	// columns maps each column name to its position in a tuple.
	columns map[string]int
	// isEvents and isConversations say which table it is; other tables
	// (published to another consumer) are ignored.
	isEvents, isConversations bool
}

// eventColumns are the columns of convo.events the decoder reads.
var eventColumns = []string{"conversation_id", "seq", "kind", "prompt_id", "block_id", "tool_call_id", "payload", "created_at"}

func (d *pgoutputDecoder) inTransaction() bool { return d.tx != nil }

// decode handles one pgoutput message. It returns the transaction when the
// message is its commit, and an error when the stream makes no sense (the
// session should end).
func (d *pgoutputDecoder) decode(data []byte) (tx *walTx, err error) {
	defer func() {
		// pglogrepl indexes into the message without bounds checks.
		if r := recover(); r != nil {
			tx, err = nil, fmt.Errorf("malformed pgoutput message: %v", r)
		}
	}()
	msg, err := pglogrepl.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("parse pgoutput message: %w", err)
	}
	switch m := msg.(type) {
	case *pglogrepl.RelationMessage:
		return nil, d.relation(m)
	case *pglogrepl.BeginMessage:
		d.tx = &walTx{}
	case *pglogrepl.InsertMessage:
		rel, err := d.change(m.RelationID)
		if err != nil || !rel.isEvents {
			return nil, err
		}
		e, err := rel.event(m.Tuple, d.types)
		if err != nil {
			id, ok := rel.uuid(m.Tuple, "conversation_id")
			if !ok {
				return nil, fmt.Errorf("event row without a conversation: %w", err)
			}
			d.tx.unreadable = append(d.tx.unreadable, unreadableRow{conversationID: id, err: err})
			return nil, nil
		}
		d.tx.events = append(d.tx.events, e)
	case *pglogrepl.DeleteMessage:
		rel, err := d.change(m.RelationID)
		if err != nil || !rel.isConversations {
			return nil, err
		}
		id, ok := rel.uuid(m.OldTuple, "id")
		if !ok {
			return nil, errors.New("deleted conversation row without its id")
		}
		d.tx.deleted = append(d.tx.deleted, id)
	case *pglogrepl.CommitMessage:
		tx := d.tx
		d.tx = nil
		if tx == nil {
			return nil, errors.New("commit without begin")
		}
		tx.end = m.TransactionEndLSN
		return tx, nil
	}
	// Type, origin, truncate and update messages carry nothing for the hub.
	return nil, nil
}

func (d *pgoutputDecoder) relation(m *pglogrepl.RelationMessage) error {
	rel := &relation{
		name:            m.Namespace + "." + m.RelationName,
		columns:         make(map[string]int, len(m.Columns)),
		isEvents:        m.Namespace == "convo" && m.RelationName == "events",
		isConversations: m.Namespace == "convo" && m.RelationName == "conversations",
	}
	for i, c := range m.Columns {
		rel.columns[c.Name] = i
	}
	if rel.isEvents {
		for _, c := range eventColumns {
			if _, ok := rel.columns[c]; !ok {
				return fmt.Errorf("relation %s has no column %s", rel.name, c)
			}
		}
	}
	if _, ok := rel.columns["id"]; rel.isConversations && !ok {
		return fmt.Errorf("relation %s has no column id", rel.name)
	}
	d.relations[m.RelationID] = rel
	return nil
}

// change returns the relation of a row change inside a transaction.
func (d *pgoutputDecoder) change(relationID uint32) (*relation, error) {
	if d.tx == nil {
		return nil, errors.New("row change outside a transaction")
	}
	rel, ok := d.relations[relationID]
	if !ok {
		return nil, fmt.Errorf("row change of relation %d, which was never described", relationID)
	}
	return rel, nil
}

// value returns column name's text value, or nil for NULL.
func (r *relation) value(tuple *pglogrepl.TupleData, name string) ([]byte, error) {
	i := r.columns[name]
	if tuple == nil || i >= len(tuple.Columns) {
		return nil, fmt.Errorf("%s: the row has no column %s", r.name, name)
	}
	switch c := tuple.Columns[i]; c.DataType {
	case pglogrepl.TupleDataTypeText:
		return c.Data, nil
	case pglogrepl.TupleDataTypeNull:
		return nil, nil
	default:
		return nil, fmt.Errorf("%s.%s: value of kind %q, want text", r.name, name, c.DataType)
	}
}

func (r *relation) uuid(tuple *pglogrepl.TupleData, name string) (uuid.UUID, bool) {
	v, err := r.value(tuple, name)
	if err != nil || v == nil {
		return uuid.UUID{}, false
	}
	id, err := uuid.ParseBytes(v)
	return id, err == nil
}

func (r *relation) nullUUID(tuple *pglogrepl.TupleData, name string) (uuid.NullUUID, error) {
	v, err := r.value(tuple, name)
	if err != nil || v == nil {
		return uuid.NullUUID{}, err
	}
	id, err := uuid.ParseBytes(v)
	if err != nil {
		return uuid.NullUUID{}, fmt.Errorf("%s.%s: %w", r.name, name, err)
	}
	return uuid.NullUUID{UUID: id, Valid: true}, nil
}

// required returns column name's text value, which must not be NULL.
func (r *relation) required(tuple *pglogrepl.TupleData, name string) ([]byte, error) {
	v, err := r.value(tuple, name)
	if err == nil && v == nil {
		err = fmt.Errorf("%s.%s is NULL", r.name, name)
	}
	return v, err
}

// event decodes an inserted convo.events row.
func (r *relation) event(tuple *pglogrepl.TupleData, types *pgtype.Map) (conversation.Event, error) {
	var e conversation.Event
	v, err := r.required(tuple, "conversation_id")
	if err != nil {
		return e, err
	}
	if e.ConversationID, err = uuid.ParseBytes(v); err != nil {
		return e, fmt.Errorf("%s.conversation_id: %w", r.name, err)
	}
	if v, err = r.required(tuple, "seq"); err != nil {
		return e, err
	}
	if e.Seq, err = strconv.ParseInt(string(v), 10, 64); err != nil {
		return e, fmt.Errorf("%s.seq: %w", r.name, err)
	}
	if v, err = r.required(tuple, "kind"); err != nil {
		return e, err
	}
	e.Kind = conversation.EventKind(v)
	if e.PromptID, err = r.nullUUID(tuple, "prompt_id"); err != nil {
		return e, err
	}
	if e.BlockID, err = r.nullUUID(tuple, "block_id"); err != nil {
		return e, err
	}
	if e.ToolCallID, err = r.nullUUID(tuple, "tool_call_id"); err != nil {
		return e, err
	}
	if v, err = r.required(tuple, "payload"); err != nil {
		return e, err
	}
	// The tuple's bytes are the decoder's own copy: no need to copy again.
	e.Payload = json.RawMessage(v)
	if v, err = r.required(tuple, "created_at"); err != nil {
		return e, err
	}
	// Text as the session's DateStyle=ISO, TimeZone=UTC write it.
	var created time.Time
	if err := types.Scan(pgtype.TimestamptzOID, pgtype.TextFormatCode, v, &created); err != nil {
		return e, fmt.Errorf("%s.created_at %q: %w", r.name, v, err)
	}
	e.CreatedAt = created
	return e, nil
}
