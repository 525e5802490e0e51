package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/redistest"
	"github.com/latchkey/latchkey/rlock"
)

// TestTLS runs the lock over TLS: a redis-server that listens only on a TLS
// port, with a CA and certificate made for the test. Lock, a waiter woken by
// the unlock message (well inside the holder's 30s TTL, so by pub/sub over
// TLS), Unlock. A client that does not trust the CA, or does not speak TLS,
// cannot connect: TLS is really on.
func TestTLS(t *testing.T) {
	ctx := context.Background()
	files, err := redistest.NewTLSFiles(t.TempDir())
	require.NoError(t, err)
	srv, err := redistest.StartTLSProcess(ctx, files)
	require.NoError(t, err, "redis-server must be built with TLS support (Debian's is)")
	t.Cleanup(func() { srv.Close() })
	tp := topology{name: "tls", addrs: []string{srv.Addr}, tls: files.ClientConfig()}

	rc := redisClient(t, tp)
	port, err := rc.Do(ctx, rc.B().ConfigGet().Parameter("port").Build()).AsStrMap()
	require.NoError(t, err)
	require.Equal(t, "0", port["port"], "the server must not listen in plain text")

	name := lockName(t)
	holder := lockClient(t, tp, rlock.Options{}).Mutex(name)
	hctx := mustLock(t, ctx, holder)
	att := newAttempts()
	waiter := lockClient(t, tp, rlock.Options{OnAttempt: att.hook}).Mutex(name)
	acquired := startWaiter(t, ctx, waiter, att)
	require.NoError(t, holder.Unlock(hctx))
	requireAcquired(t, acquired, 5*time.Second, "the unlock message did not wake the waiter over TLS")
	require.False(t, exists(t, rc, holder.Key()))

	// Without the CA (system roots only) the handshake fails verification.
	_, err = rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr}, DisableCache: true,
		TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12}})
	require.Error(t, err)
	var unknownCA x509.UnknownAuthorityError
	require.True(t, errors.As(err, &unknownCA), "want an unknown-authority error, got %v", err)
	// Plain RESP gets no answer from a TLS port.
	_, err = rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr}, DisableCache: true})
	require.Error(t, err, "a plain-text client connected to the TLS port")
}
