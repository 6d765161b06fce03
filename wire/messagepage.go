package wire

import (
	"encoding/base64"
	"encoding/binary"
	"math"
)

// A messages page token (Snapshot.older_page_token, ListMessages) names
// the position before which a page of older messages ends: base64url of a
// tag byte and the position. Clients treat it as opaque.
const messagesTokenTag = 'm'

// EncodeMessagesToken makes the token of the messages before position.
func EncodeMessagesToken(before int64) string {
	b := make([]byte, 9)
	b[0] = messagesTokenTag
	binary.BigEndian.PutUint64(b[1:], uint64(before))
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeMessagesToken reads a required messages page token field.
func DecodeMessagesToken(field, token string) (int64, error) {
	if token == "" {
		return 0, Invalid(field, "is required")
	}
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(b) != 9 || b[0] != messagesTokenTag {
		return 0, Invalid(field, "is not a messages page token this server issued")
	}
	before := binary.BigEndian.Uint64(b[1:])
	if before == 0 || before > math.MaxInt64 {
		return 0, Invalid(field, "is not a messages page token this server issued")
	}
	return int64(before), nil
}
