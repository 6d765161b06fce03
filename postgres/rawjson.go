package postgres

import (
	"context"
	"encoding/json"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// KeepRawJSON makes the connections of cfg scan json and jsonb values into
// json.RawMessage (every JSON column of the store's queries) as the bytes
// PostgreSQL sent, without encoding/json, which pgx uses by default and
// whose nesting limit (10,000) fails the read of a deeper value. jsonb
// holds one: a database written before the SQL functions applied convo's
// rule for JSON (at most 64 levels) may hold block metadata nested 12,000
// deep, and the readers render such a value as a placeholder (wire) only
// if its read does not fail first. Valid JSON scans as before; other
// destinations (a map, a struct) still decode with encoding/json. Give it
// the configuration of every pool a Store reads through.
//
// Like SetSnapshotBytes, it runs once a connection is open (AfterConnect,
// after any hook cfg had).
func KeepRawJSON(cfg *pgxpool.Config) {
	before := cfg.AfterConnect
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		if before != nil {
			if err := before(ctx, conn); err != nil {
				return err
			}
		}
		m := conn.TypeMap()
		m.RegisterType(&pgtype.Type{Name: "json", OID: pgtype.JSONOID, Codec: &pgtype.JSONCodec{Marshal: json.Marshal, Unmarshal: unmarshalRaw}})
		m.RegisterType(&pgtype.Type{Name: "jsonb", OID: pgtype.JSONBOID, Codec: &pgtype.JSONBCodec{Marshal: json.Marshal, Unmarshal: unmarshalRaw}})
		return nil
	}
}

// unmarshalRaw is json.Unmarshal, except that a *json.RawMessage gets a
// copy of data unchecked (PostgreSQL sent valid JSON).
func unmarshalRaw(data []byte, v any) error {
	if raw, ok := v.(*json.RawMessage); ok {
		*raw = append(json.RawMessage(nil), data...)
		return nil
	}
	return json.Unmarshal(data, v)
}
