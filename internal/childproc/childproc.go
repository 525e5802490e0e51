// Package childproc starts this same program again as a child process with
// a role and parameters, and is the child's side of that too.
//
// The parent calls Start, which re-executes the running binary (a test
// binary too) with the role and the JSON-encoded parameters in the
// environment, its stdin and stdout piped to the parent and its stderr
// kept for the error that describes a failure. The child, early in main or
// TestMain, looks at Role and, in a role, decodes Params and does its work.
// What the two say to each other over stdin and stdout is theirs; this
// package starts, names, reaps and describes the process.
//
// A child does not outlive its parent: Start's context kills it, Kill
// kills it, and on Linux so does its parent's death, however the parent
// died (the parent-death signal is SIGKILL). Elsewhere a child should stop
// at EOF on its stdin, which it gets when the parent is gone.
package childproc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// The environment variables that make a process a child: its role, and its
// parameters as JSON.
const (
	RoleEnv   = "LATCHKEY_CHILD_ROLE"
	ParamsEnv = "LATCHKEY_CHILD_PARAMS"
)

// DefaultWaitDelay is how long Wait waits for the child's output to end
// once it has exited or been killed, unless Config.WaitDelay says otherwise.
const DefaultWaitDelay = 5 * time.Second

// failGrace is how long Fail lets a child exit by itself before killing it.
const failGrace = time.Second

// Role is this process's role, "" when it was not started by Start.
func Role() string { return os.Getenv(RoleEnv) }

// Params decodes this process's parameters, which Start encoded from
// Config.Params, into v.
func Params(v any) error {
	raw := os.Getenv(ParamsEnv)
	if raw == "" {
		return fmt.Errorf("childproc: no parameters in %s", ParamsEnv)
	}
	if err := json.Unmarshal([]byte(raw), v); err != nil {
		return fmt.Errorf("childproc: bad %s: %w", ParamsEnv, err)
	}
	return nil
}

// Config is what Start needs to know about a child.
type Config struct {
	// Role is what the child does; Role returns it there. It must not be
	// empty.
	Role string
	// Params are encoded as JSON for the child's Params; nil gives none.
	Params any
	// Name is how errors call the child, e.g. "worker 3"; the role if
	// empty.
	Name string
	// Args follow the program's name, e.g. "-test.run=^$" for a test
	// binary whose TestMain might not look at the role first.
	Args []string
	// StderrFile, if set, is the file the child's stderr goes to, created
	// or truncated. By default the parent keeps it in memory.
	StderrFile string
	// WaitDelay bounds how long Wait waits, once the child has exited or
	// been killed, for others that share its stderr (its own children) to
	// let go of it; 0 means DefaultWaitDelay.
	WaitDelay time.Duration
}

// Proc is a running child process seen from its parent. It must be reaped,
// with Wait, Fail or Kill, all of which may be called more than once and
// from any goroutine.
type Proc struct {
	// Stdin is the child's standard input. Closing it gives the child EOF.
	Stdin io.WriteCloser
	// Stdout is the child's standard output. Read it to its end before
	// Wait, which closes it.
	Stdout io.ReadCloser

	name       string
	cmd        *exec.Cmd
	stderr     *syncBuffer // nil when stderr goes to stderrFile
	stderrFile string

	waitOnce sync.Once
	waitErr  error // cmd.Wait's own
}

// Start starts the running program again as a child in cfg.Role. When ctx
// ends the child is killed.
func Start(ctx context.Context, cfg Config) (*Proc, error) {
	if cfg.Role == "" {
		return nil, errors.New("childproc: a child needs a role")
	}
	p := &Proc{name: cfg.Name, stderrFile: cfg.StderrFile}
	if p.name == "" {
		p.name = cfg.Role
	}
	params := []byte{}
	if cfg.Params != nil {
		var err error
		if params, err = json.Marshal(cfg.Params); err != nil {
			return nil, fmt.Errorf("%s: encoding its parameters: %w", p.name, err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("%s: finding this program to start it again: %w", p.name, err)
	}

	p.cmd = exec.CommandContext(ctx, self, cfg.Args...)
	// Later entries win: these override any the parent has as a child itself.
	p.cmd.Env = append(os.Environ(), RoleEnv+"="+cfg.Role, ParamsEnv+"="+string(params))
	p.cmd.SysProcAttr = sysProcAttr()
	p.cmd.WaitDelay = cfg.WaitDelay
	if p.cmd.WaitDelay == 0 {
		p.cmd.WaitDelay = DefaultWaitDelay
	}
	if cfg.StderrFile != "" {
		f, err := os.Create(cfg.StderrFile)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.name, err)
		}
		defer f.Close() // the child has its own copy once started
		p.cmd.Stderr = f
	} else {
		p.stderr = &syncBuffer{}
		p.cmd.Stderr = p.stderr
	}
	stdin, inErr := p.cmd.StdinPipe()
	stdout, outErr := p.cmd.StdoutPipe()
	if err := errors.Join(inErr, outErr); err != nil {
		return nil, fmt.Errorf("%s: %w", p.name, err)
	}
	p.Stdin, p.Stdout = stdin, stdout
	if err := p.cmd.Start(); err != nil { // closes the pipes
		return nil, fmt.Errorf("starting %s: %w", p.name, err)
	}
	return p, nil
}

// Name is how errors call the child.
func (p *Proc) Name() string { return p.name }

// Pid is the child's process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Signal sends sig to the child, which must not have been reaped yet.
func (p *Proc) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Stderr is what the child has written to its stderr so far.
func (p *Proc) Stderr() string {
	if p.stderr != nil {
		return p.stderr.String()
	}
	b, err := os.ReadFile(p.stderrFile)
	if err != nil {
		return fmt.Sprintf("(reading %s: %v)", p.stderrFile, err)
	}
	return string(b)
}

// Wait waits for the child to exit and reaps it. It returns nil if the
// child exited with status 0, or else an error that names the child, says
// how it ended (wrapping *exec.ExitError when it exited) and quotes its
// stderr.
func (p *Proc) Wait() error {
	if err := p.reap(); err != nil {
		return fmt.Errorf("%s: %w%s", p.name, err, p.stderrBlock())
	}
	return nil
}

// Fail describes a failure to deal with the child, say a broken or missing
// line on its stdout, while doing what: it reaps the child, killing it if
// it has not exited within a second, and returns err with the child's name,
// how it ended and its stderr. Fail does not return nil.
func (p *Proc) Fail(what string, err error) error {
	kill := time.AfterFunc(failGrace, func() { _ = p.cmd.Process.Kill() })
	werr := p.reap()
	kill.Stop()
	ended := "it exited with status 0"
	if werr != nil {
		ended = werr.Error()
	}
	if err == nil {
		err = errors.New("failed")
	}
	return fmt.Errorf("%s: %s: %w; %s%s", p.name, what, err, ended, p.stderrBlock())
}

// Kill kills the child unless it has already exited, and reaps it.
func (p *Proc) Kill() {
	_ = p.cmd.Process.Kill() // fails only once the child is reaped
	_ = p.reap()
}

// reap is cmd.Wait, once.
func (p *Proc) reap() error {
	p.waitOnce.Do(func() { p.waitErr = p.cmd.Wait() })
	return p.waitErr
}

// stderrBlock quotes the child's stderr for an error message.
func (p *Proc) stderrBlock() string {
	s := strings.TrimSpace(p.Stderr())
	if s == "" {
		return " (nothing on its stderr)"
	}
	return "\n--- its stderr ---\n" + s
}

// syncBuffer is a bytes.Buffer that exec's copier goroutine writes while
// Stderr reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
