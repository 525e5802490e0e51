package childproc

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain runs the roles of the children the tests start: this test
// binary, re-executed.
func TestMain(m *testing.M) {
	if role := Role(); role != "" {
		os.Exit(child(role))
	}
	goleak.VerifyTestMain(m)
}

type echoParams struct{ Prefix string }

type echoLine struct{ Line string }

// child is a child's main; it returns the exit code.
func child(role string) int {
	switch role {
	case "echo": // each stdin line back as JSON, after the prefix
		var p echoParams
		if err := Params(&p); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		in, out := bufio.NewScanner(os.Stdin), json.NewEncoder(os.Stdout)
		for in.Scan() {
			if err := out.Encode(echoLine{p.Prefix + in.Text()}); err != nil {
				return 1
			}
		}
		return 0
	case "fail":
		fmt.Fprintln(os.Stderr, "the child broke down")
		return 3
	case "hang": // until killed
		fmt.Println("ready")
		select {}
	case "spawn": // a hanging child of its own, whose pid it prints
		gc, err := Start(context.Background(), Config{Role: "hang"})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println(gc.Pid())
		select {}
	}
	fmt.Fprintln(os.Stderr, "unknown role", role)
	return 2
}

// firstLine reads the child's first line of output.
func firstLine(t *testing.T, p *Proc) string {
	t.Helper()
	line, err := bufio.NewReader(p.Stdout).ReadString('\n')
	if err != nil {
		t.Fatal(p.Fail("reading its first line", err))
	}
	return strings.TrimSpace(line)
}

func TestRoundTrip(t *testing.T) {
	p, err := Start(t.Context(), Config{Role: "echo", Params: echoParams{Prefix: "> "}, Name: "echo child"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Name() != "echo child" || p.Pid() <= 0 {
		t.Errorf("name %q, pid %d", p.Name(), p.Pid())
	}
	if _, err := io.WriteString(p.Stdin, "one\ntwo\n"); err != nil {
		t.Fatal(err)
	}
	p.Stdin.Close()
	dec := json.NewDecoder(p.Stdout)
	var got []string
	for {
		var l echoLine
		if err := dec.Decode(&l); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(p.Fail("reading", err))
		}
		got = append(got, l.Line)
	}
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, "|") != "> one|> two" {
		t.Errorf("echoed %q", got)
	}
	if p.Wait() != nil || p.Stderr() != "" {
		t.Errorf("a second Wait: %v; stderr %q", p.Wait(), p.Stderr())
	}
	p.Kill() // after Wait: nothing to do
}

// TestFailureDescribed checks that Wait's error names the child, says how
// it ended and quotes its stderr, kept in memory or in a file.
func TestFailureDescribed(t *testing.T) {
	for _, file := range []string{"", filepath.Join(t.TempDir(), "stderr")} {
		p, err := Start(t.Context(), Config{Role: "fail", Name: "worker 7", StderrFile: file})
		if err != nil {
			t.Fatal(err)
		}
		err = p.Wait()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 3 {
			t.Fatalf("Wait: %v, want exit status 3", err)
		}
		want := "worker 7: exit status 3\n--- its stderr ---\nthe child broke down"
		if err.Error() != want {
			t.Errorf("file %q: Wait: %q, want %q", file, err, want)
		}
		if again := p.Wait(); again == nil || again.Error() != want {
			t.Errorf("a second Wait: %v", again)
		}
		if err := p.Fail("talking", io.ErrUnexpectedEOF); !errors.Is(err, io.ErrUnexpectedEOF) ||
			!strings.HasPrefix(err.Error(), "worker 7: talking: unexpected EOF; exit status 3\n--- its stderr ---\nthe child broke down") {
			t.Errorf("Fail: %v", err)
		}
	}
}

// TestFailKillsAHangingChild: a child that has not exited after the grace
// is killed, and the error says so.
func TestFailKillsAHangingChild(t *testing.T) {
	p, err := Start(t.Context(), Config{Role: "hang"})
	if err != nil {
		t.Fatal(err)
	}
	if line := firstLine(t, p); line != "ready" {
		t.Fatalf("first line %q", line)
	}
	start := time.Now()
	err = p.Fail("reading its report", errors.New("bad line"))
	if took := time.Since(start); took < failGrace || took > failGrace+10*time.Second {
		t.Errorf("Fail took %v", took)
	}
	if want := "hang: reading its report: bad line; signal: killed (nothing on its stderr)"; err.Error() != want {
		t.Errorf("Fail: %q, want %q", err, want)
	}
}

func TestContextAndKill(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	p, err := Start(ctx, Config{Role: "hang"})
	if err != nil {
		t.Fatal(err)
	}
	firstLine(t, p)
	cancel()
	if err := p.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("Wait after the context ended: %v", err)
	}

	p, err = Start(t.Context(), Config{Role: "hang"})
	if err != nil {
		t.Fatal(err)
	}
	firstLine(t, p)
	p.Kill()
	p.Kill()
	if err := p.Wait(); err == nil || !strings.Contains(err.Error(), "signal: killed") {
		t.Errorf("Wait after Kill: %v", err)
	}
	if err := p.Signal(os.Interrupt); !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("Signal after reaping: %v", err)
	}
}

func TestStartErrors(t *testing.T) {
	if _, err := Start(t.Context(), Config{}); err == nil {
		t.Error("a child without a role started")
	}
	if _, err := Start(t.Context(), Config{Role: "echo", Params: make(chan int)}); err == nil {
		t.Error("a child with parameters JSON cannot encode started")
	}
	if _, err := Start(t.Context(), Config{Role: "echo", StderrFile: filepath.Join(t.TempDir(), "no", "such", "dir")}); err == nil {
		t.Error("a child whose stderr file cannot be created started")
	}
}

// TestChildSide reads the role and the parameters as a child does.
func TestChildSide(t *testing.T) {
	t.Setenv(RoleEnv, "worker")
	t.Setenv(ParamsEnv, `{"Prefix":"x"}`)
	var p echoParams
	if Role() != "worker" || Params(&p) != nil || p.Prefix != "x" {
		t.Errorf("role %q, params %+v", Role(), p)
	}
	t.Setenv(ParamsEnv, `{"Prefix":`)
	if err := Params(&p); err == nil || !strings.Contains(err.Error(), ParamsEnv) {
		t.Errorf("bad JSON: %v", err)
	}
	t.Setenv(ParamsEnv, "")
	if err := Params(&p); err == nil {
		t.Error("no parameters decoded")
	}
}
