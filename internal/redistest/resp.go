package redistest

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// This file holds a deliberately tiny RESP2 client. Server bring-up only needs
// PING and a handful of CLUSTER commands; using a full client such as rueidis
// here would start background goroutines (pipelining, topology refresh) that
// outlive the call and trip goleak in callers' TestMain.

// redisError is an error reply ("-ERR ...") from the server, kept distinct
// from I/O errors so callers can tell "not ready yet" from "refused".
type redisError string

func (e redisError) Error() string { return string(e) }

// respConn is one short-lived connection used during server bring-up.
type respConn struct {
	c net.Conn
	r *bufio.Reader
}

// dialRESP connects with a short timeout so a black-holed address cannot stall
// the bounded readiness loops. With conf it speaks TLS; the timeout then
// covers the handshake too.
func dialRESP(ctx context.Context, addr string, conf *tls.Config) (*respConn, error) {
	d := net.Dialer{Timeout: 2 * time.Second}
	var c net.Conn
	var err error
	if conf != nil {
		c, err = (&tls.Dialer{NetDialer: &d, Config: conf}).DialContext(ctx, "tcp", addr)
	} else {
		c, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, err
	}
	return &respConn{c: c, r: bufio.NewReader(c)}, nil
}

func (rc *respConn) Close() error { return rc.c.Close() }

// do sends one command and reads one reply. Every call is bounded by a
// deadline because the peer may be a docker-proxy that accepted the TCP
// connection but has no backend yet and never answers.
func (rc *respConn) do(ctx context.Context, args ...string) (any, error) {
	deadline := time.Now().Add(5 * time.Second)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := rc.c.SetDeadline(deadline); err != nil {
		return nil, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(rc.c, b.String()); err != nil {
		return nil, err
	}
	return readReply(rc.r)
}

// readReply decodes one RESP2 value: strings and bulk strings become string,
// integers int64, arrays []any, nil bulk/array nil, error replies redisError.
func readReply(r *bufio.Reader) (any, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 || !strings.HasSuffix(line, "\r\n") {
		return nil, fmt.Errorf("redistest: malformed RESP line %q", line)
	}
	body := line[1 : len(line)-2]
	switch line[0] {
	case '+':
		return body, nil
	case '-':
		return nil, redisError(body)
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil {
			return nil, fmt.Errorf("redistest: bad bulk length %q: %w", body, err)
		}
		if n < 0 {
			return nil, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil {
			return nil, fmt.Errorf("redistest: bad array length %q: %w", body, err)
		}
		if n < 0 {
			return nil, nil
		}
		out := make([]any, n)
		for i := range out {
			if out[i], err = readReply(r); err != nil {
				return nil, err
			}
		}
		return out, nil
	default:
		return nil, fmt.Errorf("redistest: unexpected RESP type in %q", line)
	}
}

// command runs a single command on a fresh connection. Bring-up issues few
// commands, so connection reuse is not worth the bookkeeping.
func command(ctx context.Context, addr string, args ...string) (any, error) {
	return commandTLS(ctx, addr, nil, args...)
}

// commandTLS is command over TLS when conf is set.
func commandTLS(ctx context.Context, addr string, conf *tls.Config, args ...string) (any, error) {
	rc, err := dialRESP(ctx, addr, conf)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return rc.do(ctx, args...)
}

// ping reports whether addr answers PING with PONG right now, over TLS
// when conf is set.
func ping(ctx context.Context, addr string, conf *tls.Config) error {
	v, err := commandTLS(ctx, addr, conf, "PING")
	if err != nil {
		return err
	}
	if s, _ := v.(string); s != "PONG" {
		return fmt.Errorf("redistest: PING to %s answered %v, want PONG", addr, v)
	}
	return nil
}

// readyTimeout bounds how long we wait for a fresh server to answer. A
// redis-server starts in milliseconds; the slack covers container start-up on
// a loaded 2-core CI machine running tests with -race.
const readyTimeout = 15 * time.Second

// waitPing polls until addr answers PING, the timeout passes, or alive reports
// that the server is gone (so a crashed server fails fast instead of after the
// full timeout). alive may be nil.
func waitPing(ctx context.Context, addr string, alive func() error) error {
	return waitPingTLS(ctx, addr, nil, alive)
}

// waitPingTLS is waitPing over TLS when conf is set.
func waitPingTLS(ctx context.Context, addr string, conf *tls.Config, alive func() error) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		if alive != nil {
			if err := alive(); err != nil {
				return err
			}
		}
		last = ping(ctx, addr, conf)
		if last == nil {
			return nil
		}
		var re redisError
		// Auth and similar errors will not go away by waiting; LOADING will.
		if errors.As(last, &re) && !strings.HasPrefix(string(re), "LOADING") {
			return fmt.Errorf("redistest: %s refused PING: %w", addr, last)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redistest: %s did not answer PING within %s (last error: %v): %w",
				addr, readyTimeout, last, ctx.Err())
		case <-tick.C:
		}
	}
}
