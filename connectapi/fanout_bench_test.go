package connectapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/convo-dev/convo/conversation"
	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
	"github.com/convo-dev/convo/internal/testwait"
)

// BenchmarkParkedFanOut measures the wire path of fan-out: one blockDelta
// handed to the hub reaches 100 parked Connect-JSON streams, each on its
// own HTTP/1.1 connection, and the next event follows once every
// subscriber has read it (one write per event and subscriber, as when
// subscribers keep up). The clients are in the process too: cpu-µs/delivery
// is the process's CPU time (user and system, server and clients) per
// delivery, which the server's side of a change moves.
func BenchmarkParkedFanOut(b *testing.B) {
	const subscribers = 100
	tb := setup(b)
	sent := tb.send(b, tb.client, "", "fan-out")
	conversationID := uuid.MustParse(sent.ConversationId)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	transport := &http.Transport{MaxIdleConnsPerHost: -1, Protocols: new(http.Protocols)}
	transport.Protocols.SetHTTP1(true)
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport}
	body, _ := json.Marshal(map[string]string{"conversationId": sent.ConversationId})
	frame := append(binary.BigEndian.AppendUint32([]byte{0}, uint32(len(body))), body...)

	var received sync.WaitGroup // one Done per delta read by a subscriber
	var started sync.WaitGroup
	var readers sync.WaitGroup
	var lastSeq int64
	var seqOnce sync.Once
	for range subscribers {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, tb.url+convov1connect.ConversationServiceStreamConversationProcedure, bytes.NewReader(frame))
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/connect+json")
		req.Header.Set("Connect-Protocol-Version", "1")
		res, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		if res.StatusCode != http.StatusOK {
			b.Fatalf("StreamConversation: %s", res.Status)
		}
		started.Add(1)
		readers.Go(func() {
			defer res.Body.Close()
			r := bufio.NewReader(res.Body)
			var prefix [5]byte
			var msg []byte
			first := true
			for {
				if _, err := io.ReadFull(r, prefix[:]); err != nil {
					return
				}
				msg = append(msg[:0], make([]byte, binary.BigEndian.Uint32(prefix[1:]))...)
				if _, err := io.ReadFull(r, msg); err != nil || prefix[0]&2 != 0 {
					return
				}
				switch {
				case first:
					first = false
					var start convov1.StreamConversationResponse
					if err := protojson.Unmarshal(msg, &start); err != nil {
						panic(err)
					}
					seqOnce.Do(func() { lastSeq = start.GetSnapshot().GetSeq() })
					started.Done()
				case bytes.Contains(msg, []byte(`"blockDelta"`)):
					received.Done()
				}
			}
		})
	}
	started.Wait()
	testwait.For(b, "every stream parked", func() bool { return tb.parking.Len() == subscribers })

	ids := uuid.NullUUID{UUID: uuid.New(), Valid: true}
	payload, _ := protojson.Marshal(&convov1.BlockDelta{
		PromptId: sent.PromptId, MessageId: sent.AssistantMessageId, BlockId: ids.UUID.String(), Content: " token",
	})
	before := cpuTime(b)
	b.ResetTimer()
	for i := range b.N {
		received.Add(subscribers)
		tb.hub.Deliver([]conversation.Event{{
			ConversationID: conversationID, Seq: lastSeq + 1 + int64(i), Kind: conversation.EventBlockDelta,
			BlockID: ids, Payload: payload, CreatedAt: time.Now(),
		}})
		received.Wait()
	}
	b.StopTimer()
	cpu := cpuTime(b) - before
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N*subscribers), "cpu-µs/delivery")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e3, "µs/event")
	b.ReportMetric(0, "ns/op")
	cancel()
	readers.Wait()
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		b.Fatal(fmt.Errorf("getrusage: %w", err))
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
