package rlock_test

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
	"github.com/latchkey/latchkey/rlock/fenced"
)

// noIO is a rueidis.Client that counts every call that could reach Redis.
// Its embedded interface is nil, so any method not listed here panics: the
// validation tests prove that bad input never gets as far as the network.
type noIO struct {
	rueidis.Client
	calls atomic.Int64
}

func (c *noIO) Mode() rueidis.ClientMode { return rueidis.ClientModeStandalone }
func (c *noIO) Do(context.Context, rueidis.Completed) rueidis.RedisResult {
	c.calls.Add(1)
	return rueidis.RedisResult{}
}

func (c *noIO) DoMulti(_ context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	c.calls.Add(1)
	return make([]rueidis.RedisResult, len(cmds))
}

func newNoIO(t *testing.T) (*rlock.Client, *noIO) {
	t.Helper()
	rc := &noIO{}
	c, err := rlock.NewClient(rc, rlock.Options{})
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, c.Close())
		require.Zero(t, rc.calls.Load(), "bad input reached Redis")
	})
	return c, rc
}

// TestNewClientRejects: NewClient refuses bad options, and Options.Validate,
// asked without a client, refuses the same.
func TestNewClientRejects(t *testing.T) {
	_, err := rlock.NewClient(nil, rlock.Options{})
	require.ErrorIs(t, err, rlock.ErrInvalidOptions)
	for name, opts := range map[string]rlock.Options{
		"brace in prefix":       {Prefix: "a{b"},
		"long prefix":           {Prefix: strings.Repeat("p", rlock.MaxPrefixLen+1)},
		"long client name":      {ClientName: strings.Repeat("c", rlock.MaxClientNameLen+1)},
		"timeout below 30ms":    {WatchdogTimeout: 29 * time.Millisecond},
		"timeout over MaxLease": {WatchdogTimeout: rlock.MaxLease + 1},
		"interval >= timeout":   {WatchdogTimeout: time.Second, WatchdogInterval: time.Second},
		"interval below min":    {WatchdogInterval: time.Millisecond},
		"batch above max":       {RenewBatchSize: 1_000_000},
		"negative timeout":      {WatchdogTimeout: -time.Second},
		"negative batch":        {RenewBatchSize: -1},
		"spin max below min":    {SpinBackoffMin: 10 * time.Millisecond, SpinBackoffMax: time.Millisecond},
		"negative spin min":     {SpinBackoffMin: -1},
		"negative release time": {ReleaseTimeout: -1},
		"unknown pubsub mode":   {PubSub: 7},
		"sync timeout >= release timeout": {ReleaseTimeout: 300 * time.Millisecond,
			SyncReplicas: rlock.SyncReplicas{Replicas: 1, Timeout: 300 * time.Millisecond}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := rlock.NewClient(&noIO{}, opts)
			require.ErrorIs(t, err, rlock.ErrInvalidOptions)
			require.ErrorIs(t, opts.Validate(), rlock.ErrInvalidOptions)
		})
	}
	// What depends on the client's mode is NewClient's alone.
	require.NoError(t, rlock.Options{WatchdogTimeout: 30 * time.Millisecond, PubSub: rlock.PubSubClassic}.Validate())
}

func TestNamesAreCheckedBeforeIO(t *testing.T) {
	c, _ := newNoIO(t)
	ctx := context.Background()
	for _, name := range []string{"", "a{b", "}", "{tag}", strings.Repeat("x", rlock.MaxNameLen+1)} {
		for _, m := range []*rlock.Mutex{c.Mutex(name), c.SpinMutex(name)} {
			_, err := m.Lock(ctx)
			require.ErrorIs(t, err, rlock.ErrInvalidName)
			_, _, err = m.TryLock(ctx)
			require.ErrorIs(t, err, rlock.ErrInvalidName)
			require.ErrorIs(t, m.Unlock(ctx), rlock.ErrInvalidName)
			_, err = m.IsLocked(ctx)
			require.ErrorIs(t, err, rlock.ErrInvalidName)
			_, err = m.HoldCount(ctx)
			require.ErrorIs(t, err, rlock.ErrInvalidName)
			_, err = m.TTL(ctx)
			require.ErrorIs(t, err, rlock.ErrInvalidName)
		}
		_, err := c.ForceUnlock(ctx, name)
		require.ErrorIs(t, err, rlock.ErrInvalidName)
	}
}

func TestUnusualNamesAreKeptVerbatim(t *testing.T) {
	c, _ := newNoIO(t)
	for _, name := range []string{"a\x00b", "\xff\xfe", "*?[]", "with space", strings.Repeat("y", rlock.MaxNameLen)} {
		m := c.Mutex(name)
		require.Equal(t, "latchkey:{"+name+"}", m.Key())
		require.Equal(t, name, m.Name())
	}
	custom, err := rlock.NewClient(&noIO{}, rlock.Options{Prefix: "app:locks"})
	require.NoError(t, err)
	defer custom.Close()
	require.Equal(t, "app:locks:{job}", custom.Mutex("job").Key())
}

func TestLockOptionsAreCheckedBeforeIO(t *testing.T) {
	c, _ := newNoIO(t)
	ctx := context.Background()
	m := c.Mutex("ok")
	for name, opts := range map[string][]rlock.LockOption{
		"zero lease":      {rlock.WithLease(0)},
		"negative lease":  {rlock.WithLease(-time.Second)},
		"sub-ms lease":    {rlock.WithLease(time.Microsecond)},
		"huge lease":      {rlock.WithLease(rlock.MaxLease + time.Millisecond)},
		"overflow lease":  {rlock.WithLease(time.Duration(1<<63 - 1))},
		"negative wait":   {rlock.WithWait(-time.Second)},
		"lease and wait-": {rlock.WithLease(time.Second), rlock.WithWait(-1)},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := m.TryLock(ctx, opts...)
			require.ErrorIs(t, err, rlock.ErrInvalidArgument)
		})
	}
	_, err := m.Lock(ctx, rlock.WithWait(time.Second))
	require.ErrorIs(t, err, rlock.ErrInvalidArgument, "WithWait is TryLock's")
}

// TestContextsAreCheckedBeforeIO: every exported function and method of
// rlock and rlock/fenced that takes a context refuses a nil one with
// ErrInvalidArgument (fenced's own), and an ended one with its error (cause
// kept), before any I/O. The list is read from the source, so a new method
// cannot be missed: the test fails until it is given a receiver here. The
// methods that take a hold's context (Unlock and its kin) need not look at
// its cancellation (`defer m.Unlock(lctx)` must release after lctx ended;
// see TestUnlockIgnoresCancellation in the integration tests): for them an
// ended context that carries no hold is ErrNotHeld.
func TestContextsAreCheckedBeforeIO(t *testing.T) {
	c, rc := newNoIO(t)
	receivers := map[string][]any{
		"Client": {c}, "Mutex": {c.Mutex("ok"), c.SpinMutex("ok")}, "RWMutex": {c.RWMutex("ok"), c.SpinRWMutex("ok")},
		"Semaphore": {c.Semaphore("ok", 2), c.SpinSemaphore("ok", 2)}, "MultiMutex": {c.MultiMutex("ok", "fine")},
		"CountDownLatch": {c.CountDownLatch("ok")}, "Store": {fenced.New(rc, "ok")},
		"Election": {observeCalls{c.Election("ok")}},
		// The functions: a receiver of their own, whose method calls them.
		"": {lockers{c}},
	}
	carriers := map[string]bool{"Unlock": true, "RUnlock": true, "Release": true, "Extend": true, "RExtend": true, "Token": true, "Resign": true}
	var nilCtx context.Context
	cancelled, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("the caller gave up"))
	for _, m := range contextMethods(t, ".", "fenced") {
		if m.recv == "" && m.name == "LeaseEnd" {
			continue // reads the context, sends nothing: see TestLeaseEndWithoutHold
		}
		t.Run(strings.TrimPrefix(m.recv+"."+m.name, "."), func(t *testing.T) {
			recvs, ok := receivers[m.recv]
			require.True(t, ok, "no receiver of type %s: add one to this test", m.recv)
			for _, r := range recvs {
				call := func(ctx context.Context) (err error) {
					meth := reflect.ValueOf(r).MethodByName(m.name)
					require.True(t, meth.IsValid(), "%T has no method %s: add it to this test's lockers", r, m.name)
					return lockPanic(func() {
						out := meth.Call(contextArgs(meth.Type(), ctx))
						err, _ = out[len(out)-1].Interface().(error)
						panic(err) // nil: returned as it is
					})
				}
				err := call(nilCtx)
				if m.recv == "Store" {
					require.ErrorIs(t, err, fenced.ErrInvalidArgument, "%T", r)
				} else {
					require.ErrorIs(t, err, rlock.ErrInvalidArgument, "%T", r)
				}
				err = call(cancelled)
				if carriers[m.name] {
					require.ErrorIs(t, err, rlock.ErrNotHeld, "%T", r)
					continue
				}
				require.ErrorIs(t, err, context.Canceled, "%T", r)
				require.ErrorContains(t, err, "the caller gave up", "%T: the cause is kept", r)
			}
		})
	}
}

// observeCalls is an Election whose Observe, which answers only with its
// channel, reports a refusal as the others do: a channel closed at once,
// with nothing delivered, is ctx's refusal; anything else is an error.
type observeCalls struct{ *rlock.Election }

func (o observeCalls) Observe(ctx context.Context) error {
	select {
	case l, open := <-o.Election.Observe(ctx):
		switch {
		case open:
			return fmt.Errorf("delivered %+v", l)
		case ctx == nil:
			return fmt.Errorf("%w: closed at once", rlock.ErrInvalidArgument)
		}
		return fmt.Errorf("closed at once: %w: %w", ctx.Err(), context.Cause(ctx))
	case <-time.After(5 * time.Second):
		return errors.New("Observe's channel stayed open")
	}
}

// lockers gives the functions that take a context a method each, and
// reports their panic as the error a sync.Locker cannot return.
type lockers struct{ c *rlock.Client }

func (l lockers) Locker(ctx context.Context) error {
	return lockPanic(func() { rlock.Locker(ctx, l.c.Mutex("ok")).Lock() })
}

func (l lockers) RLocker(ctx context.Context) error {
	return lockPanic(func() { rlock.RLocker(ctx, l.c.RWMutex("ok")).Lock() })
}

// lockPanic runs lock, which must panic, and returns the panic's value as
// an error (a runtime error as it is, so that the test shows it).
func lockPanic(lock func()) (err error) {
	err = errors.New("did not panic")
	defer func() {
		if p := recover(); p != nil {
			if err, _ = p.(error); err == nil {
				err = fmt.Errorf("%v", p)
			}
		}
	}()
	lock()
	return err
}

// contextArgs are the arguments of a call of a method of type mt with ctx:
// valid values of the other parameters, so that only ctx can be wrong.
func contextArgs(mt reflect.Type, ctx context.Context) []reflect.Value {
	ctxType := reflect.TypeFor[context.Context]()
	var args []reflect.Value
	for i := range mt.NumIn() {
		in := mt.In(i)
		if mt.IsVariadic() && i == mt.NumIn()-1 {
			break
		}
		switch {
		case in == ctxType:
			v := reflect.New(ctxType).Elem()
			if ctx != nil {
				v.Set(reflect.ValueOf(ctx))
			}
			args = append(args, v)
		case in.Kind() == reflect.String:
			args = append(args, reflect.ValueOf("ok").Convert(in))
		case in == reflect.TypeFor[time.Duration]():
			args = append(args, reflect.ValueOf(time.Second))
		case in.Kind() == reflect.Int64:
			args = append(args, reflect.ValueOf(int64(1)).Convert(in))
		case in.Kind() == reflect.Func:
			args = append(args, reflect.MakeFunc(in, func([]reflect.Value) []reflect.Value {
				return []reflect.Value{reflect.Zero(in.Out(0))}
			}))
		default:
			panic(fmt.Sprintf("contextArgs: no value for a parameter of type %v", in))
		}
	}
	return args
}

// ctxMethod is an exported function (recv "") or method that takes a
// context.Context.
type ctxMethod struct{ recv, name string }

// contextMethods reads the non-test Go files of the packages in dirs and
// returns their exported functions and methods (of exported types) that
// take a context.Context.
func contextMethods(t *testing.T, dirs ...string) []ctxMethod {
	t.Helper()
	var out []ctxMethod
	fset := token.NewFileSet()
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		require.NoError(t, err)
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			require.NoError(t, err)
			for _, d := range f.Decls {
				fn, ok := d.(*ast.FuncDecl)
				if !ok || !fn.Name.IsExported() || !takesContext(fn.Type) {
					continue
				}
				recv := ""
				if fn.Recv != nil {
					typ := fn.Recv.List[0].Type
					if star, ok := typ.(*ast.StarExpr); ok {
						typ = star.X
					}
					id, ok := typ.(*ast.Ident)
					if !ok || !id.IsExported() {
						continue
					}
					recv = id.Name
				}
				out = append(out, ctxMethod{recv, fn.Name.Name})
			}
		}
	}
	require.NotEmpty(t, out)
	return out
}

func takesContext(ft *ast.FuncType) bool {
	for _, p := range ft.Params.List {
		if sel, ok := p.Type.(*ast.SelectorExpr); ok && sel.Sel.Name == "Context" {
			if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "context" {
				return true
			}
		}
	}
	return false
}

func TestClosedClientRefusesBeforeIO(t *testing.T) {
	c, _ := newNoIO(t)
	require.NoError(t, c.Close())
	_, err := c.Mutex("ok").Lock(context.Background())
	require.ErrorIs(t, err, rlock.ErrClosed)
	_, _, err = c.SpinMutex("ok").TryLock(context.Background())
	require.ErrorIs(t, err, rlock.ErrClosed)
}

// TestLeaseEndWithoutHold: a context that carries no leased hold, nil
// included, has no lease end.
func TestLeaseEndWithoutHold(t *testing.T) {
	var nilCtx context.Context
	for _, ctx := range []context.Context{nilCtx, context.Background()} {
		_, ok := rlock.LeaseEnd(ctx)
		require.False(t, ok)
	}
}
