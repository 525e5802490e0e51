package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"
)

// SentinelMasterName is the name the Sentinels of StartSentinel monitor
// the master under (a client's SentinelOption.MasterSet).
const SentinelMasterName = "latchkey"

// SentinelDownAfter is down-after-milliseconds: how long the master may
// not answer before a Sentinel thinks it down. With quorum agreeing a
// moment later and the election and promotion on loopback, a killed
// master is replaced in a few seconds. Lower risks failovers of a master
// that a loaded machine merely delayed.
const SentinelDownAfter = time.Second

// sentinelFailoverTimeout is failover-timeout: it bounds each phase of a
// failover and spaces out retries (twice this) when an election fails, so
// it is kept short, but well above what a promotion on loopback takes.
const sentinelFailoverTimeout = 5 * time.Second

// SentinelSetup is a master with replicas and Sentinels monitoring it, all
// redis-server processes on 127.0.0.1 (the Sentinels run in sentinel mode,
// `redis-server sentinel.conf --sentinel`, so no package besides
// redis-server is needed).
type SentinelSetup struct {
	// MasterName is the name the Sentinels know the master by.
	MasterName string
	// SentinelAddrs are the Sentinels' addresses, a Sentinel client's
	// InitAddress.
	SentinelAddrs []string
	// MasterAddr and ReplicaAddrs are the data nodes as started. Failovers
	// change who is master: see Master.
	MasterAddr   string
	ReplicaAddrs []string

	mu        sync.Mutex // guards dead
	data      []*redisProcess
	sentinels []*redisProcess
	dead      map[string]bool
	closeOnce sync.Once
	closeErr  error
}

// StartSentinel starts a master, replicas replicas of it and sentinels
// Sentinels (at least 1) monitoring it with a quorum of a majority of them.
// It returns once the replicas are in sync and every Sentinel knows the
// master, all the replicas and all the other Sentinels, so a failover can
// be agreed on at once. ctx bounds start-up only.
func StartSentinel(ctx context.Context, replicas, sentinels int) (*SentinelSetup, error) {
	if replicas < 0 || replicas > 10 || sentinels < 1 || sentinels > 10 {
		return nil, fmt.Errorf("redistest: StartSentinel needs 0..10 replicas and 1..10 sentinels, got %d and %d", replicas, sentinels)
	}
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	s := &SentinelSetup{MasterName: SentinelMasterName, dead: map[string]bool{}}
	ok := false
	defer func() {
		if !ok {
			s.Close()
		}
	}()
	dataArgs := []string{"--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0"}
	master, err := startOnFreePort(ctx, bin, procSetup{}, dataArgs)
	if err != nil {
		return nil, err
	}
	s.data = append(s.data, master)
	s.MasterAddr = master.addr
	host, port, _ := net.SplitHostPort(master.addr)
	for range replicas {
		r, err := startOnFreePort(ctx, bin, procSetup{}, append(slices.Clone(dataArgs), "--replicaof", host, port))
		if err != nil {
			return nil, err
		}
		s.data = append(s.data, r)
		s.ReplicaAddrs = append(s.ReplicaAddrs, r.addr)
	}
	conf := fmt.Sprintf("sentinel monitor %[1]s %[2]s %[3]s %[4]d\n"+
		"sentinel down-after-milliseconds %[1]s %[5]d\n"+
		"sentinel failover-timeout %[1]s %[6]d\n"+
		// All replicas move to a new master at once.
		"sentinel parallel-syncs %[1]s %[7]d\n",
		s.MasterName, host, port, sentinels/2+1,
		SentinelDownAfter.Milliseconds(), sentinelFailoverTimeout.Milliseconds(), max(replicas, 1))
	sentinelSetup := procSetup{prepare: func(dir string) ([]string, error) {
		// Sentinel rewrites its config file with what it learns, so each
		// gets a copy of its own.
		path := filepath.Join(dir, "sentinel.conf")
		if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
			return nil, fmt.Errorf("redistest: writing %s: %w", path, err)
		}
		return []string{path, "--sentinel"}, nil
	}}
	for range sentinels {
		p, err := startOnFreePort(ctx, bin, sentinelSetup, nil)
		if err != nil {
			return nil, err
		}
		s.sentinels = append(s.sentinels, p)
		s.SentinelAddrs = append(s.SentinelAddrs, p.addr)
	}
	err = poll(ctx, "the Sentinels to know each other and the replicas", func() (string, error) {
		if problem := s.agreedProblem(ctx, s.MasterAddr, s.ReplicaAddrs); problem != "" {
			return problem, nil
		}
		for _, addr := range s.SentinelAddrs {
			m, err := sentinelMaster(ctx, addr, s.MasterName)
			if err != nil {
				return "", err
			}
			if m["num-slaves"] != strconv.Itoa(replicas) || m["num-other-sentinels"] != strconv.Itoa(sentinels-1) {
				return fmt.Sprintf("Sentinel %s knows %s replicas and %s other Sentinels", addr, m["num-slaves"], m["num-other-sentinels"]), nil
			}
		}
		return "", nil
	})
	if err != nil {
		return nil, err
	}
	ok = true
	return s, nil
}

// sentinelMaster returns SENTINEL MASTER name as a map.
func sentinelMaster(ctx context.Context, addr, name string) (map[string]string, error) {
	v, err := command(ctx, addr, "SENTINEL", "MASTER", name)
	if err != nil {
		return nil, fmt.Errorf("redistest: SENTINEL MASTER %s on %s: %w", name, addr, err)
	}
	fields, _ := v.([]any)
	m := map[string]string{}
	for i := 0; i+1 < len(fields); i += 2 {
		m[fmt.Sprint(fields[i])] = fmt.Sprint(fields[i+1])
	}
	return m, nil
}

// sentinelMasterAddr asks one Sentinel where the master is.
func sentinelMasterAddr(ctx context.Context, addr, name string) (string, error) {
	v, err := command(ctx, addr, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", name)
	if err != nil {
		return "", fmt.Errorf("redistest: SENTINEL GET-MASTER-ADDR-BY-NAME on %s: %w", addr, err)
	}
	hp, _ := v.([]any)
	if len(hp) != 2 {
		return "", fmt.Errorf("redistest: Sentinel %s does not know %s (%v)", addr, name, v)
	}
	return net.JoinHostPort(fmt.Sprint(hp[0]), fmt.Sprint(hp[1])), nil
}

// liveSentinels lists the Sentinels that are running.
func (s *SentinelSetup) liveSentinels() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return running(s.sentinels, s.dead)
}

// liveData lists the data nodes (master and replicas) that are running.
func (s *SentinelSetup) liveData() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return running(s.data, s.dead)
}

// Master returns the master's address as the Sentinels report it, failing
// when the running Sentinels do not agree.
func (s *SentinelSetup) Master(ctx context.Context) (string, error) {
	var master string
	for _, addr := range s.liveSentinels() {
		m, err := sentinelMasterAddr(ctx, addr, s.MasterName)
		if err != nil {
			return "", err
		}
		if master != "" && m != master {
			return "", fmt.Errorf("redistest: Sentinels disagree on the master: %s and %s", master, m)
		}
		master = m
	}
	if master == "" {
		return "", errors.New("redistest: no Sentinel is running")
	}
	return master, nil
}

// agreedProblem returns why the setup is not yet in this state, or "":
// every running Sentinel reports master, which says it is a master, and
// each of replicas is its replica with the link up.
func (s *SentinelSetup) agreedProblem(ctx context.Context, master string, replicas []string) string {
	for _, addr := range s.liveSentinels() {
		m, err := sentinelMasterAddr(ctx, addr, s.MasterName)
		if err != nil {
			return err.Error()
		}
		if m != master {
			return fmt.Sprintf("Sentinel %s reports master %s, want %s", addr, m, master)
		}
	}
	v, err := command(ctx, master, "INFO", "replication")
	if err != nil {
		return fmt.Sprintf("%s: INFO replication: %v", master, err)
	}
	if role := parseInfo(fmt.Sprint(v))["role"]; role != "master" {
		return fmt.Sprintf("%s reports role:%s", master, role)
	}
	for _, r := range replicas {
		if problem := replicaProblem(ctx, r, master); problem != "" {
			return problem
		}
	}
	return ""
}

// Failover runs SENTINEL FAILOVER, which promotes a replica without asking
// the other Sentinels or waiting for the master to be down. It returns the
// new master once every running Sentinel reports it, it reports role
// master, and the other replicas replicate it with the link up.
//
// The old master keeps running as a master until a Sentinel notices it
// (about 10 s later: Sentinel waits a few hello periods before forcing its
// view) and turns it into a replica; Settle waits for that.
func (s *SentinelSetup) Failover(ctx context.Context) (string, error) {
	old, err := s.Master(ctx)
	if err != nil {
		return "", err
	}
	sentinels := s.liveSentinels()
	if _, err := command(ctx, sentinels[0], "SENTINEL", "FAILOVER", s.MasterName); err != nil {
		return "", fmt.Errorf("redistest: SENTINEL FAILOVER %s on %s: %w", s.MasterName, sentinels[0], err)
	}
	return s.awaitNewMaster(ctx, old, "SENTINEL FAILOVER")
}

// KillMaster kills the master with SIGKILL, as kill -9 would, and waits as
// Failover does until the Sentinels have agreed it is down and promoted a
// replica. The old master stays dead.
func (s *SentinelSetup) KillMaster(ctx context.Context) (string, error) {
	old, err := s.Master(ctx)
	if err != nil {
		return "", err
	}
	if err := s.Kill(old); err != nil {
		return "", err
	}
	return s.awaitNewMaster(ctx, old, "kill -9 of "+old)
}

// awaitNewMaster waits for a master other than old, with every running
// data node besides old replicating it.
func (s *SentinelSetup) awaitNewMaster(ctx context.Context, old, what string) (string, error) {
	var master string
	err := poll(ctx, "a new master after "+what, func() (string, error) {
		m, err := s.Master(ctx)
		if err != nil {
			return err.Error(), nil
		}
		if m == old {
			return "the Sentinels still report " + old, nil
		}
		master = m
		return s.agreedProblem(ctx, m, s.othersThan(m, old)), nil
	})
	return master, err
}

// othersThan lists the running data nodes other than the given ones.
func (s *SentinelSetup) othersThan(not ...string) []string {
	return slices.DeleteFunc(s.liveData(), func(a string) bool { return slices.Contains(not, a) })
}

// Settle waits until every running Sentinel reports the same master and
// every other running data node, a failed-over old master included,
// replicates it with the link up.
func (s *SentinelSetup) Settle(ctx context.Context) error {
	return poll(ctx, "the Sentinel setup to settle", func() (string, error) {
		m, err := s.Master(ctx)
		if err != nil {
			return err.Error(), nil
		}
		return s.agreedProblem(ctx, m, s.othersThan(m)), nil
	})
}

// Kill kills the node (data node or Sentinel) at addr with SIGKILL and
// returns without waiting for the others to react.
func (s *SentinelSetup) Kill(addr string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range append(slices.Clone(s.data), s.sentinels...) {
		if p.addr == addr {
			if err := p.kill(); err != nil {
				return err
			}
			s.dead[addr] = true
			return nil
		}
	}
	return fmt.Errorf("redistest: %s is not a node of this Sentinel setup", addr)
}

// Close kills every process and removes their directories. It is safe to
// call more than once and returns the first result every time.
func (s *SentinelSetup) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		var errs []error
		// Sentinels first, so none starts a failover while the data
		// nodes go.
		for _, p := range append(slices.Clone(s.sentinels), s.data...) {
			if err := p.close(); err != nil {
				errs = append(errs, err)
			}
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}
