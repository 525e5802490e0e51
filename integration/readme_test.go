package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReadmeExampleBuilds: README.md's first example is a whole program
// that compiles as it stands, against the current API. It is written to a
// directory under testdata (inside the module, so that its imports resolve
// here; ./... skips testdata) and built with the go command running this
// test.
func TestReadmeExampleBuilds(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	m := regexp.MustCompile("(?s)## Example\n\n```go\n(.*?)```").FindSubmatch(readme)
	require.NotNil(t, m, "README.md has no go block under ## Example")
	require.Contains(t, string(m[1]), "package main", "the example must be a whole program")

	require.NoError(t, os.MkdirAll("testdata", 0o755))
	dir, err := os.MkdirTemp("testdata", "readme-")
	require.NoError(t, err)
	t.Cleanup(func() {
		os.RemoveAll(dir)
		os.Remove("testdata") // only if empty: it may hold other tests' files
	})
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), m[1], 0o644))

	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(gobin); err != nil {
		gobin, err = exec.LookPath("go")
		require.NoError(t, err, "no go command to build the README example with")
	}
	out, err := exec.Command(gobin, "build", "-o", os.DevNull, "./"+filepath.ToSlash(dir)).CombinedOutput()
	require.NoError(t, err, "README example does not build:\n%s", out)
}
