package redistest

import (
	"context"
	"crypto/tls"
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"
)

// TestStartTLSProcess: the server listens only with TLS, on Addr; a client
// trusting the generated CA talks to it, plain RESP and clients that do not
// trust the CA do not get an answer, and Close reaps it.
func TestStartTLSProcess(t *testing.T) {
	ctx := context.Background()
	files, err := NewTLSFiles(t.TempDir())
	require.NoError(t, err)
	s, err := StartTLSProcess(ctx, files, "--maxmemory", "7654321")
	require.NoError(t, err, "Debian's redis-server is built with TLS; a build without it cannot run this test")
	defer s.Close()
	require.Equal(t, KindProcess, s.Kind)

	v, err := commandTLS(ctx, s.Addr, files.ClientConfig(), "CONFIG", "GET", "maxmemory")
	require.NoError(t, err)
	require.Equal(t, []any{"maxmemory", "7654321"}, v, "extra arguments apply")
	v, err = commandTLS(ctx, s.Addr, files.ClientConfig(), "CONFIG", "GET", "port")
	require.NoError(t, err)
	require.Equal(t, []any{"port", "0"}, v, "the plain port must be off")

	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{s.Addr}, TLSConfig: files.ClientConfig(), DisableCache: true})
	require.NoError(t, err)
	got, err := c.Do(ctx, c.B().Ping().Build()).ToString()
	c.Close()
	require.NoError(t, err)
	require.Equal(t, "PONG", got)

	require.Error(t, ping(ctx, s.Addr, nil), "plain RESP on the TLS port")
	require.Error(t, ping(ctx, s.Addr, &tls.Config{MinVersion: tls.VersionTLS12}), "a client without the CA")

	require.NoError(t, s.Close())
	requireProcessGone(t, s.pid)
}
