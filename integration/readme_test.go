package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// readmeImports are the packages README.md's snippets may use, by the name
// they are called by: a snippet that is a bare function gets the ones it
// names.
var readmeImports = map[string]string{
	"context": "context", "errors": "errors", "fmt": "fmt", "log": "log", "time": "time",
	"rueidis": "github.com/redis/rueidis", "rlock": "github.com/latchkey/latchkey/rlock",
}

// TestReadmeExampleBuilds: the go blocks under README.md's "## Example"
// build, against the current API: the first is a whole program (Client.Do),
// each one after it declarations (Mutex with Lock and Unlock) added to that
// program in a file of their own, with the imports they name. They are
// written to a directory under testdata (inside the module, so that their
// imports resolve here; ./... skips testdata) and built with the go command
// running this test.
func TestReadmeExampleBuilds(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	section := regexp.MustCompile("(?s)\n## Example\n(.*?)\n## ").FindSubmatch(readme)
	require.NotNil(t, section, "README.md has no ## Example section")
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllSubmatch(section[1], -1)
	require.GreaterOrEqual(t, len(blocks), 2, "## Example should show Client.Do, then Mutex")
	require.Contains(t, string(blocks[0][1]), "package main", "the first example must be a whole program")
	require.Contains(t, string(blocks[0][1]), ".Do(", "the first example is Client.Do")
	require.Contains(t, string(blocks[1][1]), ".Unlock(", "the second example is Lock and Unlock")

	require.NoError(t, os.MkdirAll("testdata", 0o755))
	dir, err := os.MkdirTemp("testdata", "readme-")
	require.NoError(t, err)
	t.Cleanup(func() {
		os.RemoveAll(dir)
		os.Remove("testdata") // only if empty: it may hold other tests' files
	})
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), blocks[0][1], 0o644))
	for i, b := range blocks[1:] {
		src := "package main\n\nimport (\n"
		for name, path := range readmeImports {
			if strings.Contains(string(b[1]), name+".") {
				src += "\t" + strconv.Quote(path) + "\n"
			}
		}
		src += ")\n\n" + string(b[1])
		require.NoError(t, os.WriteFile(filepath.Join(dir, "snippet"+strconv.Itoa(i+1)+".go"), []byte(src), 0o644))
	}

	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(gobin); err != nil {
		gobin, err = exec.LookPath("go")
		require.NoError(t, err, "no go command to build the README example with")
	}
	out, err := exec.Command(gobin, "build", "-o", os.DevNull, "./"+filepath.ToSlash(dir)).CombinedOutput()
	require.NoError(t, err, "README example does not build:\n%s", out)
}

// TestRegressSetupRefusesOldRedis: `make setup` (which `make test` and
// `make demo` run first) stops at a redis-server older than 7.0, saying
// what is needed. It accepted any version, so on a distribution that
// packages Redis 6.0 the Cluster suites failed minutes later on SSUBSCRIBE.
func TestRegressSetupRefusesOldRedis(t *testing.T) {
	shim := t.TempDir()
	for name, out := range map[string]string{
		"redis-server": "Redis server v=6.0.16 sha=00000000:0 malloc=jemalloc-5.2.1 bits=64 build=1",
		"redis-cli":    "redis-cli 6.0.16",
	} {
		require.NoError(t, os.WriteFile(filepath.Join(shim, name), []byte("#!/bin/sh\necho '"+out+"'\n"), 0o755))
	}
	cmd := exec.Command("make", "-s", "-C", "..", "setup")
	cmd.Env = append(os.Environ(), "PATH="+shim+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "make setup accepted Redis 6.0.16:\n%s", out)
	require.Contains(t, string(out), "redis-server 7.0 or later is needed")
}

// TestRegressSetupWithoutSudo: `make setup` run by a user who is not root,
// on a machine without sudo and without redis-server, says how to go on.
// It ran `sudo apt-get ...` regardless and failed with "sudo: not found",
// no hint given.
func TestRegressSetupWithoutSudo(t *testing.T) {
	makeBin, err := exec.LookPath("make")
	require.NoError(t, err)
	// PATH is the shim alone: no redis-server, redis-cli or sudo, and an id
	// that says uid 1000 whoever runs the test.
	shim := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(shim, "id"), []byte("#!/bin/sh\necho 1000\n"), 0o755))
	cmd := exec.Command(makeBin, "-s", "-C", "..", "setup")
	cmd.Env = append(os.Environ(), "PATH="+shim)
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "make setup succeeded without redis-server:\n%s", out)
	require.NotContains(t, string(out), "not found", "make setup tried sudo")
	require.Contains(t, string(out), "install redis-server 7.0 or newer")
	require.Contains(t, string(out), "as root")
}

// TestRegressDocsGoVersion: every "Go 1.N" the README and docs ask for is
// at least the go.mod's floor. docs/development.md said Go 1.25+ while the
// module (and the OpenTelemetry API it requires) needs 1.26.
func TestRegressDocsGoVersion(t *testing.T) {
	mod, err := os.ReadFile("../go.mod")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^go 1\.(\d+)`).FindSubmatch(mod)
	require.NotNil(t, m, "no go line in go.mod")
	floor, _ := strconv.Atoi(string(m[1]))
	docs, err := filepath.Glob("../docs/*.md")
	require.NoError(t, err)
	for _, p := range append(docs, "../README.md") {
		text, err := os.ReadFile(p)
		require.NoError(t, err)
		for _, v := range regexp.MustCompile(`\bGo 1\.(\d+)`).FindAllSubmatch(text, -1) {
			minor, _ := strconv.Atoi(string(v[1]))
			require.GreaterOrEqual(t, minor, floor, "%s asks for Go 1.%d; go.mod needs 1.%d", p, minor, floor)
		}
	}
}
