// Package dockerredis starts the integration tests' standalone Redis as a
// Docker container ("redis:7", or an image built from the host's
// redis-server when no registry answers). It lives in the integration
// module so that Docker's client is no requirement of the library: Register
// plugs it into internal/redistest's Start.
package dockerredis

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/ory/dockertest/v3"
	dc "github.com/ory/dockertest/v3/docker"

	"github.com/latchkey/latchkey/internal/redistest"
)

// LocalImage is the tag of the image built from the host's redis-server when
// "redis:7" can be neither found locally nor pulled (offline machines, CI
// without registry access). A fixed tag lets later runs reuse it.
const LocalImage = "latchkey-redis:7-debian"

// upstreamImage is preferred over LocalImage because it is what production
// deployments run.
const upstreamImage = "redis:7"

// ContainerLabel is set on every container Start creates. Containers are
// removed on Close, but a test binary killed with SIGKILL cannot clean up, and
// Docker has no equivalent of Pdeathsig; leftovers can then be removed with
//
//	docker rm -f $(docker ps -aq --filter label=org.latchkey.redistest)
const ContainerLabel = "org.latchkey.redistest"

// Timeouts for Docker calls, so that a wedged engine makes Start fall back
// to a process instead of hanging the test binary.
const (
	dockerPingTimeout = 5 * time.Second
	pullTimeout       = 5 * time.Minute
	pullInactivity    = 30 * time.Second
	buildTimeout      = 5 * time.Minute
)

// dockerfile builds an image holding nothing but redis-server and the shared
// libraries it links, so it can be built offline (no base image to pull).
const dockerfile = `FROM scratch
COPY rootfs/ /
ENTRYPOINT ["/usr/bin/redis-server"]
`

// containerArgs make Redis reachable through Docker's port forwarding, which
// connects from a non-loopback address inside the container. This is safe
// only because the host side is published on 127.0.0.1.
var containerArgs = []string{
	"--bind", "0.0.0.0",
	"--protected-mode", "no",
	"--save", "",
	"--appendonly", "no",
}

// newPool connects to the engine named by DOCKER_HOST (or the default socket)
// and checks that it answers, so callers can fall back quickly when it does not.
func newPool(ctx context.Context) (*dockertest.Pool, error) {
	pool, err := dockertest.NewPool("")
	if err != nil {
		return nil, fmt.Errorf("redistest: cannot create a docker client (check DOCKER_HOST): %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, dockerPingTimeout)
	defer cancel()
	if err := pool.Client.PingWithContext(pctx); err != nil {
		releasePool(pool)
		return nil, fmt.Errorf("redistest: no docker engine answered (start docker, fix DOCKER_HOST, or set LATCHKEY_NO_DOCKER=1): %w", err)
	}
	return pool, nil
}

// releasePool drops idle HTTP connections so their reader goroutines exit
// and goleak stays quiet. go-dockerclient disables keep-alives by default,
// which makes this a safeguard against a future default change.
func releasePool(pool *dockertest.Pool) {
	if pool == nil || pool.Client == nil || pool.Client.HTTPClient == nil {
		return
	}
	pool.Client.HTTPClient.CloseIdleConnections()
}

// EnsureImage makes sure an image usable as Redis 7 exists locally and
// returns its "repo:tag": "redis:7" when present or pullable, otherwise
// LocalImage, built from the host's redis-server if it is not there yet.
// Building needs `ldd` and a redis-server binary (see Binary) but no network.
func EnsureImage(ctx context.Context) (string, error) {
	pool, err := newPool(ctx)
	if err != nil {
		return "", err
	}
	defer releasePool(pool)
	return ensureImage(ctx, pool)
}

// imageMu serialises image resolution within one process so that parallel
// callers do not build the same image twice.
var imageMu sync.Mutex

// pullFailed remembers, per process, that the registry was unreachable, so a
// test binary starting many servers neither waits on nor logs each failed
// pull again. Guarded by imageMu.
var pullFailed bool

func ensureImage(ctx context.Context, pool *dockertest.Pool) (string, error) {
	imageMu.Lock()
	defer imageMu.Unlock()

	if _, err := pool.Client.InspectImage(upstreamImage); err == nil {
		return upstreamImage, nil
	}
	if !pullFailed {
		repo, tag := splitImage(upstreamImage)
		pctx, cancel := context.WithTimeout(ctx, pullTimeout)
		err := pool.Client.PullImage(dc.PullImageOptions{
			Repository:        repo,
			Tag:               tag,
			OutputStream:      io.Discard,
			InactivityTimeout: pullInactivity,
			Context:           pctx,
		}, dc.AuthConfiguration{})
		cancel()
		if err == nil {
			return upstreamImage, nil
		}
		if ctx.Err() != nil {
			return "", fmt.Errorf("redistest: pulling %s: %w", upstreamImage, ctx.Err())
		}
		pullFailed = true
		redistest.Logf("redistest: cannot pull %s (%v); using locally built %s", upstreamImage, err, LocalImage)
	}

	if _, err := pool.Client.InspectImage(LocalImage); err == nil {
		return LocalImage, nil
	}
	if err := buildLocalImage(ctx, pool); err != nil {
		return "", err
	}
	return LocalImage, nil
}

// buildLocalImage builds LocalImage from the host's redis-server and the
// exact shared libraries it was linked against, each at its own absolute
// path, so the dynamic loader finds them without an ld.so.cache.
func buildLocalImage(ctx context.Context, pool *dockertest.Pool) error {
	start := time.Now()
	bin, err := redistest.Binary()
	if err != nil {
		return fmt.Errorf("redistest: building %s needs a host redis-server: %w", LocalImage, err)
	}
	// Copy the real file, not the symlink: Debian's redis-server links to
	// redis-check-rdb, and a symlink would dangle in the image.
	real, err := filepath.EvalSymlinks(bin)
	if err != nil {
		return fmt.Errorf("redistest: resolving %s: %w", bin, err)
	}
	libs, err := sharedLibs(ctx, real)
	if err != nil {
		return err
	}

	dir, err := os.MkdirTemp("", "latchkey-redis-image-*")
	if err != nil {
		return fmt.Errorf("redistest: cannot create a build context dir (check $TMPDIR): %w", err)
	}
	defer os.RemoveAll(dir)
	rootfs := filepath.Join(dir, "rootfs")
	if err := copyFile(real, filepath.Join(rootfs, "usr/bin/redis-server"), 0o755); err != nil {
		return err
	}
	for _, lib := range libs {
		if err := copyFile(lib, filepath.Join(rootfs, lib), 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
		return fmt.Errorf("redistest: writing Dockerfile: %w", err)
	}

	bctx, cancel := context.WithTimeout(ctx, buildTimeout)
	defer cancel()
	var out bytes.Buffer
	err = pool.Client.BuildImage(dc.BuildImageOptions{
		Name:                LocalImage,
		Dockerfile:          "Dockerfile",
		ContextDir:          dir,
		OutputStream:        &out,
		RmTmpContainer:      true,
		ForceRmTmpContainer: true,
		Labels:              map[string]string{ContainerLabel: "image"},
		Context:             bctx,
	})
	if err != nil {
		return fmt.Errorf("redistest: building %s from %s failed: %w\nbuild output:\n%s", LocalImage, real, err, out.String())
	}
	if _, err := pool.Client.InspectImage(LocalImage); err != nil {
		return fmt.Errorf("redistest: build of %s reported success but the image is missing: %w\nbuild output:\n%s", LocalImage, err, out.String())
	}
	redistest.Logf("redistest: built %s from %s in %s", LocalImage, real, time.Since(start).Round(time.Millisecond))
	return nil
}

// sharedLibs lists the absolute paths of the libraries (and dynamic loader)
// that ldd reports for bin. The vDSO has no path and is skipped: the kernel
// provides it.
func sharedLibs(ctx context.Context, bin string) ([]string, error) {
	out, err := exec.CommandContext(ctx, "ldd", bin).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && len(ee.Stderr) > 0 {
			err = fmt.Errorf("%w: %s", err, bytes.TrimSpace(ee.Stderr))
		}
		return nil, fmt.Errorf("redistest: `ldd %s` failed (install libc-bin, or make redis:7 pullable): %w", bin, err)
	}
	var libs []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.Contains(line, "not found") {
			return nil, fmt.Errorf("redistest: %s needs a library that is missing on this host: %q", bin, line)
		}
		if _, after, ok := strings.Cut(line, "=>"); ok {
			line = strings.TrimSpace(after)
		}
		path, _, _ := strings.Cut(line, " ")
		if strings.HasPrefix(path, "/") {
			libs = append(libs, path)
		}
	}
	return libs, sc.Err()
}

// copyFile copies src's contents (following symlinks) to dst, creating
// parent directories, so the build context contains only regular files.
func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("redistest: reading %s for the image: %w", src, err)
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("redistest: preparing build context: %w", err)
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return fmt.Errorf("redistest: preparing build context: %w", err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("redistest: copying %s into the build context: %w", src, err)
	}
	return out.Close()
}

// splitImage splits "repo:tag" at the last colon, which is the tag separator
// even when the repository contains a registry host with a port.
func splitImage(image string) (repo, tag string) {
	i := strings.LastIndex(image, ":")
	if i < 0 || strings.Contains(image[i:], "/") {
		return image, "latest"
	}
	return image[:i], image[i+1:]
}

// startDocker runs a Redis container published on 127.0.0.1 only.
func startDocker(ctx context.Context) (*redistest.Server, error) {
	pool, err := newPool(ctx)
	if err != nil {
		return nil, err
	}
	image, err := ensureImage(ctx, pool)
	if err != nil {
		releasePool(pool)
		return nil, err
	}
	repo, tag := splitImage(image)
	const port = "6379/tcp"
	res, err := pool.RunWithOptions(&dockertest.RunOptions{
		Repository:   repo,
		Tag:          tag,
		Cmd:          containerArgs,
		ExposedPorts: []string{port},
		// Empty HostPort lets Docker pick a free port, avoiding races
		// between concurrently running test binaries.
		PortBindings: map[dc.Port][]dc.PortBinding{
			port: {{HostIP: "127.0.0.1", HostPort: ""}},
		},
		Labels: map[string]string{ContainerLabel: "container"},
	}, func(hc *dc.HostConfig) {
		// dockertest publishes every exposed port on all interfaces by
		// default; only the explicit loopback binding above is wanted.
		hc.PublishAllPorts = false
		// Docker removes the container even if Close is never reached
		// after the server stops (e.g. it crashed).
		hc.AutoRemove = true
		hc.RestartPolicy = dc.NeverRestart()
	})
	if err != nil {
		releasePool(pool)
		return nil, fmt.Errorf("redistest: running %s: %w", image, err)
	}
	id := res.Container.ID
	stop := func() error {
		err := removeContainer(pool, id)
		releasePool(pool)
		return err
	}

	addr := res.GetHostPort(port)
	host, _, splitErr := net.SplitHostPort(addr)
	if splitErr != nil || host != "127.0.0.1" {
		stop()
		return nil, fmt.Errorf("redistest: container %.12s published %s as %q, want 127.0.0.1:<port>; check the engine's port publishing", id, port, addr)
	}

	// Checking the container on every PING poll would flood the engine;
	// twice a second is enough to fail fast on a crash.
	var lastCheck time.Time
	alive := func() error {
		if time.Since(lastCheck) < 500*time.Millisecond {
			return nil
		}
		lastCheck = time.Now()
		c, err := pool.Client.InspectContainerWithContext(id, ctx)
		if err != nil {
			var nsc *dc.NoSuchContainer
			if errors.As(err, &nsc) {
				return fmt.Errorf("redistest: container %.12s (%s) exited and was auto-removed during start-up; run it by hand to see why: docker run --rm %s %s",
					id, image, image, strings.Join(quoteArgs(containerArgs), " "))
			}
			return nil // engine hiccup: keep polling Redis
		}
		if !c.State.Running {
			return fmt.Errorf("redistest: container %.12s (%s) stopped during start-up: %s (exit code %d)", id, image, c.State.String(), c.State.ExitCode)
		}
		return nil
	}
	if err := redistest.WaitPing(ctx, addr, alive); err != nil {
		stop()
		return nil, fmt.Errorf("redistest: %s container: %w", image, err)
	}
	return redistest.NewServer(addr, redistest.KindDocker, id, stop), nil
}

// removeContainer force-removes a container. AutoRemove may race with us and
// remove it first, which counts as success; when Docker reports a removal in
// progress we wait for it so that Close returns with the container gone.
func removeContainer(pool *dockertest.Pool, id string) error {
	err := pool.Client.RemoveContainer(dc.RemoveContainerOptions{ID: id, Force: true, RemoveVolumes: true})
	var nsc *dc.NoSuchContainer
	if err == nil || errors.As(err, &nsc) {
		return nil
	}
	var de *dc.Error
	if !errors.As(err, &de) || de.Status != http.StatusConflict {
		return fmt.Errorf("redistest: removing container %.12s failed; remove it with `docker rm -f %s`: %w", id, id, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if _, ierr := pool.Client.InspectContainer(id); errors.As(ierr, &nsc) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("redistest: container %.12s still exists after removal; remove it with `docker rm -f %s`: %w", id, id, err)
}

// quoteArgs makes arguments such as the empty --save value visible in a
// copy-pasteable command line.
func quoteArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " '\"") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out[i] = a
	}
	return out
}

// Register makes redistest.Start try a container first.
func Register() { redistest.Docker = startDocker }
