package integration

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/Shopify/toxiproxy/v2/stream"
	"github.com/Shopify/toxiproxy/v2/toxics"
	"github.com/stretchr/testify/require"
)

// dropMessagesToxic is the toxiproxy toxic "drop every pub/sub message". It
// parses the RESP3 stream from Redis to the client and drops each push frame
// that delivers a message (message, smessage, pmessage), passing everything
// else through byte for byte: command replies and the subscribe
// confirmations still arrive, so the client subscribes, waits and works as
// usual, but never hears of an unlock. That is the network losing exactly
// the notifications, which a proxy that dropped whole chunks or a separate
// RESP2 pub/sub connection could not model: rueidis speaks RESP3, where
// pushes share the connection with replies.
type dropMessagesToxic struct{}

// dropMessagesType is the toxic's registered type name.
const dropMessagesType = "latchkey_drop_messages"

// Counts over every link using the toxic. Tests using it do not run in
// parallel, so a test resets them at its start and reads them at its end.
var (
	messagesDropped atomic.Int64
	respParseErrors atomic.Int64
)

func init() { toxics.Register(dropMessagesType, new(dropMessagesToxic)) }

// dropMessagesState is one connection's undecoded tail: a frame split across
// reads waits here for its remainder.
type dropMessagesState struct {
	buf    []byte
	broken bool // a parse error: pass the rest through untouched
}

// NewState implements toxics.StatefulToxic.
func (*dropMessagesToxic) NewState() any { return new(dropMessagesState) }

// Pipe implements toxics.Toxic.
func (*dropMessagesToxic) Pipe(stub *toxics.ToxicStub) {
	st := stub.State.(*dropMessagesState)
	for {
		select {
		case <-stub.Interrupt:
			return
		case c := <-stub.Input:
			if c == nil {
				stub.Close()
				return
			}
			if out := st.filter(c.Data); len(out) > 0 {
				stub.Output <- &stream.StreamChunk{Data: out, Timestamp: c.Timestamp}
			}
		}
	}
}

// filter appends data to the pending bytes and returns the complete frames
// among them, minus the message pushes.
func (st *dropMessagesState) filter(data []byte) []byte {
	if st.broken {
		return data
	}
	st.buf = append(st.buf, data...)
	var out []byte
	for len(st.buf) > 0 {
		end, err := respFrameEnd(st.buf, 0)
		if err != nil {
			respParseErrors.Add(1)
			st.broken = true
			out = append(out, st.buf...)
			st.buf = nil
			break
		}
		if end < 0 {
			break
		}
		if isMessagePush(st.buf[:end]) {
			messagesDropped.Add(1)
		} else {
			out = append(out, st.buf[:end]...)
		}
		st.buf = st.buf[end:]
	}
	st.buf = append([]byte(nil), st.buf...) // do not pin the chunk we were given
	return out
}

var errRESP = errors.New("not a RESP3 frame")

// respFrameEnd returns the offset just past the RESP3 frame starting at
// b[i], or -1 when b ends before the frame does.
func respFrameEnd(b []byte, i int) (int, error) {
	if i >= len(b) {
		return -1, nil
	}
	eol := bytes.Index(b[i:], []byte("\r\n"))
	if eol < 0 {
		return -1, nil
	}
	typ, header, next := b[i], string(b[i+1:i+eol]), i+eol+2
	switch typ {
	case '+', '-', ':', '_', ',', '#', '(':
		return next, nil
	}
	n, err := strconv.Atoi(header)
	if err != nil {
		return 0, errRESP
	}
	switch typ {
	case '$', '!', '=': // blob: n bytes and a CRLF; RESP2 null is $-1
		if n < 0 {
			return next, nil
		}
		if len(b) < next+n+2 {
			return -1, nil
		}
		return next + n + 2, nil
	case '%', '|': // map, attribute: n pairs
		n *= 2
	case '*', '~', '>': // array, set, push: n elements (RESP2 null is *-1)
	default:
		return 0, errRESP
	}
	for ; n > 0; n-- {
		if next, err = respFrameEnd(b, next); next < 0 || err != nil {
			return next, err
		}
	}
	return next, nil
}

// isMessagePush reports whether frame is a push whose kind is a delivered
// message, as opposed to a (un)subscribe confirmation.
func isMessagePush(frame []byte) bool {
	if len(frame) == 0 || frame[0] != '>' {
		return false
	}
	eol := bytes.Index(frame, []byte("\r\n"))
	kind := frame[eol+2:]
	for _, k := range []string{"message", "smessage", "pmessage"} {
		if bytes.HasPrefix(kind, []byte("$"+strconv.Itoa(len(k))+"\r\n"+k+"\r\n")) ||
			bytes.HasPrefix(kind, []byte("+"+k+"\r\n")) {
			return true
		}
	}
	return false
}

// TestDropMessagesFilter: whatever the read boundaries, the toxic passes
// replies and subscribe confirmations intact and drops exactly the messages.
func TestDropMessagesFilter(t *testing.T) {
	keep := []string{
		"%1\r\n$6\r\nserver\r\n$5\r\nredis\r\n",          // HELLO (shortened)
		">3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n",    // confirmation
		"*3\r\n:1\r\n:2\r\n_\r\n",                        // a script reply
		">3\r\n$11\r\nunsubscribe\r\n$2\r\nch\r\n:0\r\n", // confirmation
		"$-1\r\n",                              // RESP2 null
		"*2\r\n$7\r\nmessage\r\n$3\r\nnot\r\n", // an array, not a push
	}
	drop := []string{
		">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$6\r\nunlock\r\n",
		">3\r\n$8\r\nsmessage\r\n$2\r\nch\r\n$5\r\nforce\r\n",
		">4\r\n$8\r\npmessage\r\n$1\r\n*\r\n$2\r\nch\r\n$2\r\nhi\r\n",
	}
	in := keep[0] + drop[0] + keep[1] + keep[2] + drop[1] + keep[3] + drop[2] + keep[4] + keep[5]
	want := strings.Join(keep, "")
	for split := 0; split <= len(in); split++ {
		messagesDropped.Store(0)
		var st dropMessagesState
		got := string(st.filter([]byte(in[:split]))) + string(st.filter([]byte(in[split:])))
		require.Equal(t, want, got, "split at %d", split)
		require.Equal(t, int64(len(drop)), messagesDropped.Load(), "split at %d", split)
		require.Empty(t, st.buf)
	}
	var st dropMessagesState
	require.Equal(t, "?bad\r\n", string(st.filter([]byte("?bad\r\n"))), "unknown input passes through")
	require.True(t, st.broken)
	messagesDropped.Store(0)
	respParseErrors.Store(0)
}
