package luascripts

import (
	"context"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// composed is the script name.lua run after inner.lua, which becomes the
// Lua function inner(KEYS, ARGV): its parameters shadow the globals, so it
// never reads the outer script's extra keys and arguments. An election's
// scripts wrap the Mutex's instead of copying them.
func composed(name, inner string, preludes ...string) *Script {
	var src strings.Builder
	for _, f := range library(preludes) {
		src.WriteString(source(f))
	}
	src.WriteString("local function " + inner + "(KEYS, ARGV)\n" + source(inner) + "\nend\n" + source(name))
	return register(New(name, src.String()))
}

// source is the text of name.lua.
func source(name string) string {
	b, err := sources.ReadFile(name + ".lua")
	if err != nil {
		panic("luascripts: " + err.Error()) // a file named here is missing from the package
	}
	return string(b)
}

// ElectionKeys are the keys of an election: the Mutex's of the same name,
// whose lock the leader holds (its value is the lock hash's field "#val",
// elect.lua), and the observers' channel in its hash tag.
type ElectionKeys struct {
	Keys
	Observers string // the channel on which grants, resignations and force-unlocks are announced
}

// NewElectionKeys derives an election's keys from its Mutex's.
func NewElectionKeys(k Keys) ElectionKeys {
	return ElectionKeys{Keys: k, Observers: k.Lock + ":leader"}
}

// RunElect runs the elect script: the Mutex's acquire that, when granted,
// stores the leader's value and announces the new leader (a.Wake also says
// how observers are told).
func RunElect(ctx context.Context, c rueidis.Client, k ElectionKeys, a AcquireArgs, value string) (AcquireReply, error) {
	return runAcquire(ctx, c, Elect, k.AcquireKeys(), append(k.AcquireArgv(a), value, k.Observers), a.Sync)
}

// RunResign runs the electresign script: the Mutex's release, ignoring
// a.Heir (leadership never stays in the leader's process), which announces
// that none leads when nobody takes over.
func RunResign(ctx context.Context, c rueidis.Client, k ElectionKeys, a ReleaseArgs) (ReleaseReply, error) {
	return runRelease(ctx, c, ElectResign, k.releaseKeys(),
		[]string{a.Owner, itoa(a.Count), a.Wake.spec(), flag(a.Retry), k.Observers}, a.Sync)
}

// Leader is an election's state as electread reports it.
type Leader struct {
	Record Record        // the leader's holder record; zero when none leads or it is damaged
	Value  string        // its value, "" for a Mutex holder
	PTTL   time.Duration // its lease left; -2ms when none leads, -1ms without expiry
}

// ReadLeader runs the electread script.
func ReadLeader(ctx context.Context, c rueidis.Client, k ElectionKeys) (Leader, error) {
	v, err := ElectRead.Exec(ctx, c, []string{k.Lock}, nil).ToArray()
	if err != nil {
		return Leader{}, err
	}
	if len(v) != 3 {
		return Leader{}, unexpected("electread", len(v))
	}
	ms, err := v[0].AsInt64()
	if err != nil {
		return Leader{}, unexpected("electread", err)
	}
	l := Leader{PTTL: time.Duration(ms) * time.Millisecond}
	rec, _ := v[1].ToString()
	l.Value, _ = v[2].ToString()
	l.Record, err = parseRecord(rec)
	return l, err
}
