package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
)

// runPeerClients is the child process of the peer measurement. It reads a
// count n and n conversation ids from in and opens one StreamConversation
// per id against url, each on its own HTTP/1.1 connection, as connect-web
// sends it (Connect protocol, JSON). Like the peer's own client, it reads
// the frames without decoding them beyond the fields it times (seq and the
// delta's content), so that its CPU, on the same cores as the server, is
// not what is measured. Once every stream has its first
// message it writes "ready". It then reads "expect E" (the deliveries the
// writers caused), waits until that many deltas arrived or none did for
// 3 s (at most a minute), and writes one JSON line: deliveries, p50_ms,
// p99_ms, max_ms, reordered, gaps. At EOF on in it closes the streams and
// returns. A failure is written as "error <message>".
func runPeerClients(ctx context.Context, url string, in io.Reader, out io.Writer) error {
	r := bufio.NewReader(in)
	var n int
	if _, err := fmt.Fscanln(r, &n); err != nil || n < 1 {
		return fmt.Errorf("bad header: %v", err)
	}
	ids := make([]string, n)
	for i := range ids {
		line, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		ids[i] = strings.TrimSpace(line)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// One connection per stream: HTTP/1.1 carries one stream at a time,
	// so a shared transport dials a new connection for each.
	transport := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: -1,
		DisableCompression:  true,
		Protocols:           http1Only(),
	}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport}
	endpoint := url + convov1connect.ConversationServiceStreamConversationProcedure

	subs := make([]*peerSubscriber, n)
	var ready sync.WaitGroup
	var running sync.WaitGroup
	var firstErr atomic.Value
	// Dial in bounded parallel, as many tabs opening would, without a
	// thundering herd of 10,000 handshakes.
	dial := make(chan struct{}, 64)
	for i := range subs {
		s := &peerSubscriber{}
		subs[i] = s
		ready.Add(1)
		running.Go(func() {
			dial <- struct{}{}
			s.run(ctx, client, endpoint, ids[i], func(err error) {
				<-dial
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
				}
				ready.Done()
			})
		})
	}
	ready.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		fmt.Fprintf(out, "error %v\n", err)
		return err
	}
	fmt.Fprintln(out, "ready")

	for {
		line, err := r.ReadString('\n')
		if err != nil {
			break // EOF: the parent is done with us
		}
		var expected int64
		if _, err := fmt.Sscanf(line, "expect %d", &expected); err != nil {
			fmt.Fprintf(out, "error bad command %q\n", line)
			continue
		}
		total := func() int64 {
			var t int64
			for _, s := range subs {
				t += s.count.Load()
			}
			return t
		}
		start, last, lastChange := time.Now(), total(), time.Now()
		for last < expected && time.Since(lastChange) < 3*time.Second && time.Since(start) < time.Minute {
			time.Sleep(20 * time.Millisecond)
			if t := total(); t != last {
				last, lastChange = t, time.Now()
			}
		}
		b, _ := json.Marshal(summarizePeer(subs))
		fmt.Fprintln(out, string(b))
	}
	cancel()
	running.Wait()
	return nil
}

func http1Only() *http.Protocols {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	return p
}

// peerSubscriber is one stream's record.
type peerSubscriber struct {
	mu        sync.Mutex
	latencies []float64 // ms
	lastTS    int64
	lastSeq   int64
	reordered int64
	gaps      int64
	count     atomic.Int64
}

// run follows conversation id, calling ready once the first message came
// (or the stream failed), until ctx ends.
func (s *peerSubscriber) run(ctx context.Context, client *http.Client, endpoint, id string, ready func(error)) {
	body, _ := json.Marshal(map[string]string{"conversationId": id})
	frame := binary.BigEndian.AppendUint32([]byte{0}, uint32(len(body)))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(append(frame, body...)))
	if err != nil {
		ready(err)
		return
	}
	req.Header.Set("Content-Type", "application/connect+json")
	req.Header.Set("Connect-Protocol-Version", "1")
	res, err := client.Do(req)
	if err != nil {
		ready(err)
		return
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		ready(fmt.Errorf("StreamConversation: HTTP %s", res.Status))
		return
	}
	r := bufio.NewReaderSize(res.Body, 4096)
	var prefix [5]byte
	var msg []byte
	readFrame := func() ([]byte, bool) {
		if _, err := io.ReadFull(r, prefix[:]); err != nil {
			return nil, false
		}
		n := binary.BigEndian.Uint32(prefix[1:])
		msg = slices.Grow(msg[:0], int(n))[:n]
		if _, err := io.ReadFull(r, msg); err != nil {
			return nil, false
		}
		// Flag 2: the end of the stream (its trailers, or an error).
		return msg, prefix[0]&2 == 0
	}
	first, ok := readFrame()
	if !ok {
		ready(fmt.Errorf("stream ended before its snapshot: %s", first))
		return
	}
	s.lastSeq, _ = jsonInt(first, `"seq":"`)
	ready(nil)
	for {
		data, ok := readFrame()
		if !ok {
			return
		}
		now := time.Now().UnixMicro()
		if bytes.Contains(data, []byte(`"replay":true`)) {
			continue
		}
		seq, ok := jsonInt(data, `"seq":"`)
		if !ok {
			continue
		}
		s.mu.Lock()
		if seq != s.lastSeq+1 {
			s.gaps++
		}
		s.lastSeq = seq
		if ts, ok := jsonInt(data, `"content":"`); ok && bytes.Contains(data, []byte(`"blockDelta"`)) {
			s.latencies = append(s.latencies, float64(now-ts)/1000)
			if ts < s.lastTS {
				s.reordered++
			}
			s.lastTS = ts
			s.count.Add(1)
		}
		s.mu.Unlock()
	}
}

// jsonInt reads the digits after the first key in data (a key with its
// opening quote: int64 values are JSON strings).
func jsonInt(data []byte, key string) (int64, bool) {
	i := bytes.Index(data, []byte(key))
	if i < 0 {
		return 0, false
	}
	rest := data[i+len(key):]
	j := 0
	for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
		j++
	}
	v, err := strconv.ParseInt(string(rest[:j]), 10, 64)
	return v, err == nil
}

// summarizePeer merges every subscriber's record so far.
func summarizePeer(subs []*peerSubscriber) PeerResult {
	var lat []float64
	var res PeerResult
	for _, s := range subs {
		s.mu.Lock()
		lat = append(lat, s.latencies...)
		res.Reordered += s.reordered
		res.Gaps += s.gaps
		s.mu.Unlock()
	}
	slices.Sort(lat)
	q := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return round2(lat[int(p*float64(len(lat)-1))])
	}
	res.Deliveries = int64(len(lat))
	res.P50, res.P99, res.Max = q(0.5), q(0.99), q(1)
	return res
}
