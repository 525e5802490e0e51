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
