package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// rootModule is the library's module, which the CLI must belong to.
const rootModule = "github.com/latchkey/latchkey"

// allowedDeps are the only modules the library's go.mod may require
// directly: the CLI living in it must not bring in more.
var allowedDeps = map[string]bool{
	"github.com/redis/rueidis":        true,
	"github.com/google/uuid":          true,
	"go.uber.org/goleak":              true,
	"github.com/stretchr/testify":     true,
	"github.com/ory/dockertest/v3":    true,
	"go.opentelemetry.io/otel":        true,
	"go.opentelemetry.io/otel/metric": true,
	"go.opentelemetry.io/otel/trace":  true,
}

// TestInstallable: `go install github.com/latchkey/latchkey/cmd/latchkey@v`
// needs the CLI in a module whose go.mod has no replace or exclude
// directive (go install refuses those): the library's, which keeps its
// short list of dependencies.
func TestInstallable(t *testing.T) {
	out, err := exec.Command(goCommand(), "list", "-f", "{{.Module.Path}}\t{{.Module.GoMod}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	path, gomod, _ := strings.Cut(strings.TrimSpace(string(out)), "\t")
	if path != rootModule {
		t.Fatalf("cmd/latchkey is in module %s, not %s: a go.mod between them makes it a module that needs replace directives", path, rootModule)
	}
	out, err = exec.Command(goCommand(), "mod", "edit", "-json", gomod).Output()
	if err != nil {
		t.Fatalf("go mod edit -json %s: %v", gomod, err)
	}
	var mod struct {
		Require []struct {
			Path     string
			Indirect bool
		}
		Replace, Exclude []json.RawMessage
	}
	if err := json.Unmarshal(out, &mod); err != nil {
		t.Fatal(err)
	}
	if len(mod.Replace) > 0 || len(mod.Exclude) > 0 {
		t.Errorf("%s has replace or exclude directives: go install …@version would refuse it", gomod)
	}
	for _, r := range mod.Require {
		if !r.Indirect && !allowedDeps[r.Path] {
			t.Errorf("%s requires %s: the library may depend only on rueidis, uuid, the OTel API and test libraries; put what needs it in a module of its own", gomod, r.Path)
		}
	}
}

// TestDocsNameEveryFlag: docs/cli.md, the CLI's documentation, names every
// flag that a subcommand's -h lists, so that a new flag cannot go
// undocumented.
func TestDocsNameEveryFlag(t *testing.T) {
	doc, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"run", "status", "list", "force-unlock", "leader"} {
		r := latchkey(t, "", sub, "-h")
		flags := 0
		for line := range strings.Lines(r.stdout) {
			name, ok := strings.CutPrefix(line, "  -")
			if !ok {
				continue
			}
			flags++
			name, _, _ = strings.Cut(strings.TrimSpace(name), " ")
			if !strings.Contains(string(doc), "--"+name) {
				t.Errorf("docs/cli.md does not name %s's flag --%s", sub, name)
			}
		}
		if flags < 2 { // --redis and --prefix at least
			t.Errorf("%s -h lists %d flags: %q", sub, flags, r.stdout)
		}
	}
}

// TestRegressBuildsOffLinux: the module, tests included, compiles on macOS,
// and the library and CLI build on Windows. internal/redistest set Linux's
// Pdeathsig in a file every system compiles, so no test of the module (nor
// `make demo`, which starts servers through it) compiled off Linux.
func TestRegressBuildsOffLinux(t *testing.T) {
	out, err := exec.Command(goCommand(), "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	root := strings.TrimSpace(string(out))
	for _, c := range []struct{ goos, verb string }{{"darwin", "vet"}, {"windows", "build"}} {
		cmd := exec.Command(goCommand(), c.verb, "./...")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GOOS="+c.goos, "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("GOOS=%s go %s ./...: %v\n%s", c.goos, c.verb, err, out)
		}
	}
}

// TestRegressSynopsisMatchesDocs: the package doc's synopsis (go doc
// latchkey) is docs/cli.md's, whitespace aside. It lacked --pubsub M,
// which docs/cli.md and -h show.
func TestRegressSynopsisMatchesDocs(t *testing.T) {
	doc, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	// docs/cli.md's first code block; the package doc's indented lines
	// after "// Usage:".
	_, block, _ := strings.Cut(string(doc), "```\n")
	block, _, _ = strings.Cut(block, "```")
	var pkg []string
	_, usage, _ := strings.Cut(string(src), "// Usage:\n//\n")
	for line := range strings.Lines(usage) {
		l, ok := strings.CutPrefix(line, "//\t")
		if !ok {
			break
		}
		pkg = append(pkg, l)
	}
	if want, got := strings.Fields(block), strings.Fields(strings.Join(pkg, "")); !slices.Equal(got, want) {
		t.Errorf("main.go's synopsis\n%s\ndiffers from docs/cli.md's\n%s", strings.Join(pkg, ""), block)
	}
}
