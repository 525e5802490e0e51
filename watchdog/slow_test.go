package watchdog_test

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/luascripts"
	"github.com/latchkey/latchkey/watchdog"
)

// slowReplies starts a TCP proxy to target that passes requests on at once
// and holds each reply for delay: a server that runs every call, but whose
// answers come late (a loaded machine, a long queue). It returns the
// proxy's address; the test's cleanup closes it and its connections.
func slowReplies(t *testing.T, target string, delay time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
		done  = make(chan struct{})
	)
	track := func(c net.Conn) {
		mu.Lock()
		defer mu.Unlock()
		conns = append(conns, c)
	}
	t.Cleanup(func() {
		close(done)
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", target)
			if err != nil {
				_ = client.Close()
				continue
			}
			track(client)
			track(server)
			wg.Go(func() {
				_, _ = io.Copy(server, client)
				_ = server.Close()
			})
			wg.Go(func() { delayCopy(client, server, delay, done) })
		}
	})
	return ln.Addr().String()
}

// delayCopy copies from src to dst, each read delay after it arrived.
func delayCopy(dst, src net.Conn, delay time.Duration, done <-chan struct{}) {
	type piece struct {
		at  time.Time
		buf []byte
	}
	pieces := make(chan piece, 4096)
	go func() {
		defer close(pieces)
		for {
			buf := make([]byte, 64<<10)
			n, err := src.Read(buf)
			if n > 0 {
				pieces <- piece{at: time.Now(), buf: buf[:n]}
			}
			if err != nil {
				return
			}
		}
	}()
	defer func() {
		_ = dst.Close()
		for range pieces { // let the reader end
		}
	}()
	for p := range pieces {
		// The delay is the fault injected, not a wait for an event.
		timer := time.NewTimer(time.Until(p.at.Add(delay)))
		select {
		case <-done:
			timer.Stop()
			return
		case <-timer.C:
		}
		if _, err := dst.Write(p.buf); err != nil {
			return
		}
	}
}

// TestSlowRepliesStillRenew: renewals whose replies take longer than the
// interval but come well before the leases' deadlines keep the leases
// (issue 21, defect 12). Before, a tick's calls ran under a context that
// ended at the next interval; every reply came after it, so every call
// counted as failed although Redis had run it, and each lease was given up
// with ErrExpired while Redis still held it, renewed.
func TestSlowRepliesStillRenew(t *testing.T) {
	direct := standaloneClient(t)
	const (
		timeout  = time.Second
		interval = 200 * time.Millisecond
		// Longer than the interval; with the interval's wait before the
		// next send, two round trips still fit in the 970ms validity.
		delay = 300 * time.Millisecond
	)
	// The script is loaded beforehand, and the client keeps to one
	// connection, so that every renewal is one delayed round trip: no
	// NOSCRIPT reply, no new connection's handshake on the way.
	require.NoError(t, luascripts.Renew.Exec(t.Context(), direct, nil, []string{"1"}).Error())
	c := newClient(t, rueidis.ClientOption{InitAddress: []string{slowReplies(t, standaloneAddr, delay)}, PipelineMultiplex: -1})
	w := newWatchdog(t, c, watchdog.Options{Timeout: timeout, Interval: interval})
	const n = 20
	keys := make([]string, n)
	lost := newLostLog()
	for i := range keys {
		var sent time.Time
		keys[i], sent = lock(t, direct, "owner-slow", timeout)
		w.Add(keys[i], "owner-slow", sent, lost.onLost)
	}

	// Several leases' worth, sampled: without renewals every key would be
	// gone, and a lease given up would be seen before its key lapses.
	sample := time.NewTicker(50 * time.Millisecond)
	defer sample.Stop()
	for end := time.Now().Add(4 * timeout); time.Now().Before(end); <-sample.C {
		select {
		case cause := <-lost.causes:
			t.Fatalf("a lease was given up although Redis renewed it: %v", cause)
		default:
		}
		requireAllAlive(t, direct, keys)
	}
	st := w.Stats()
	assert.Zero(t, st.Lost)
	assert.Zero(t, st.Late)
	assert.GreaterOrEqual(t, st.Renewed, uint64(3*n), "each lease renewed several times")
	assert.GreaterOrEqual(t, st.MaxTick, delay, "a tick took the proxy's delay")
	// Each renewal was out when the next tick came, and went again as soon
	// as its reply was in.
	assert.NotZero(t, st.CatchUps)
	assert.Equal(t, n, w.Len())
}
