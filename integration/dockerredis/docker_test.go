package dockerredis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	dc "github.com/ory/dockertest/v3/docker"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/latchkey/latchkey/internal/redistest"
)

func TestMain(m *testing.M) {
	Register()
	goleak.VerifyTestMain(m, redistest.GoleakIgnores...)
}

// dockerAvailable skips when no engine answers, mirroring Start's fallback,
// except on CI, where it fails.
func dockerAvailable(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := newPool(ctx)
	if err != nil {
		// CI machines have a Docker engine: there, its absence is a failure,
		// not a reason to leave the docker path untested.
		if os.Getenv("CI") != "" {
			t.Fatalf("docker not reachable on CI: %v", err)
		}
		t.Skipf("docker not reachable: %v", err)
	}
	releasePool(pool)
}

func TestDocker(t *testing.T) {
	dockerAvailable(t)
	t.Setenv("REDIS_ADDR", "")
	t.Setenv("LATCHKEY_NO_DOCKER", "")
	ctx := context.Background()

	start := time.Now()
	image, err := EnsureImage(ctx)
	require.NoError(t, err)
	t.Logf("EnsureImage -> %s took %s", image, time.Since(start))
	require.Contains(t, []string{upstreamImage, LocalImage}, image)

	start = time.Now()
	s, err := redistest.Start(ctx)
	require.NoError(t, err)
	t.Logf("Start (docker, image present) took %s", time.Since(start))
	defer s.Close()
	require.Equal(t, redistest.KindDocker, s.Kind)
	require.NotEmpty(t, s.ContainerID())
	// The integration suite runs goleak while its container is up.
	require.NoError(t, goleak.Find(redistest.GoleakIgnores...), "a running container owns goroutines")

	host, _, err := net.SplitHostPort(s.Addr)
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1", host)
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{s.Addr}, DisableCache: true})
	require.NoError(t, err)
	pong, err := c.Do(ctx, c.B().Ping().Build()).ToString()
	require.NoError(t, err)
	require.Equal(t, "PONG", pong)
	require.NoError(t, c.Do(ctx, c.B().Set().Key("k").Value("v").Build()).Error())
	got, err := c.Do(ctx, c.B().Get().Key("k").Build()).ToString()
	require.NoError(t, err)
	require.Equal(t, "v", got)
	c.Close()

	// Every published port must be loopback-only.
	pool, err := newPool(ctx)
	require.NoError(t, err)
	defer releasePool(pool)
	ctr, err := pool.Client.InspectContainer(s.ContainerID())
	require.NoError(t, err)
	require.True(t, ctr.HostConfig.AutoRemove)
	require.NotEmpty(t, ctr.NetworkSettings.Ports)
	for port, bindings := range ctr.NetworkSettings.Ports {
		for _, b := range bindings {
			require.Equal(t, "127.0.0.1", b.HostIP, "port %s published on %q", port, b.HostIP)
		}
	}

	require.NoError(t, s.Close())
	_, err = pool.Client.InspectContainer(s.ContainerID())
	var nsc *dc.NoSuchContainer
	require.True(t, errors.As(err, &nsc), "container still exists after Close: %v", err)
	// Other test binaries may have containers of their own running, so
	// look for ours only.
	left, err := pool.Client.ListContainers(dc.ListContainersOptions{
		All:     true,
		Filters: map[string][]string{"label": {ContainerLabel}, "id": {s.ContainerID()}},
	})
	require.NoError(t, err)
	require.Empty(t, left, "container %s left behind", s.ContainerID())
}

func TestDockerDisabledByEngineAbsence(t *testing.T) {
	t.Setenv("REDIS_ADDR", "")
	t.Setenv("LATCHKEY_NO_DOCKER", "")
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
	var logged []string
	var mu sync.Mutex
	old := redistest.Logf
	redistest.Logf = func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		logged = append(logged, fmt.Sprintf(format, args...))
	}
	defer func() { redistest.Logf = old }()

	s, err := redistest.Start(context.Background())
	require.NoError(t, err)
	defer s.Close()
	require.Equal(t, redistest.KindProcess, s.Kind)
	require.NotEmpty(t, logged, "falling back must be logged")
	require.Contains(t, logged[0], "docker")
}

func TestSharedLibs(t *testing.T) {
	bin, err := redistest.Binary()
	require.NoError(t, err)
	libs, err := sharedLibs(context.Background(), bin)
	require.NoError(t, err)
	require.NotEmpty(t, libs)
	for _, l := range libs {
		require.True(t, strings.HasPrefix(l, "/"), l)
		require.FileExists(t, l)
	}
}

func TestSplitImage(t *testing.T) {
	for in, want := range map[string][2]string{
		"redis:7":                    {"redis", "7"},
		LocalImage:                   {"latchkey-redis", "7-debian"},
		"localhost:5000/redis":       {"localhost:5000/redis", "latest"},
		"localhost:5000/redis:7.2.4": {"localhost:5000/redis", "7.2.4"},
	} {
		r, tag := splitImage(in)
		require.Equal(t, want, [2]string{r, tag}, in)
	}
}
