package main

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/latchkey/latchkey/bench/internal/locks"
)

func TestParseFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"-procs", "4", "-g", "8", "-cs", "1ms", "-libs", "redsync, latchkey", "-reps", "2"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.procs != 4 || cfg.g != 8 || cfg.cs != time.Millisecond || cfg.reps != 2 || cfg.dur != DefaultDur || cfg.lease != DefaultLease {
		t.Errorf("parsed %+v", cfg)
	}
	if !slices.Equal(cfg.libs, []string{locks.Redsync, locks.Latchkey}) {
		t.Errorf("libs = %v, want [redsync latchkey] in the order given", cfg.libs)
	}
	sc := cfg.custom()
	if sc.Procs != 4 || sc.G != 8 || sc.Keys != 1 || sc.CSUS != 1000 {
		t.Errorf("custom scenario %+v", sc)
	}
	cfg, err = parseFlags(nil)
	if err != nil || !slices.Equal(cfg.libs, locks.All) {
		t.Errorf("defaults: libs %v, err %v; want every library", cfg.libs, err)
	}
}

func TestParseFlagsRejects(t *testing.T) {
	for _, args := range [][]string{
		{"-procs", "0"},
		{"-cs", "-1ms"},
		{"-dur", "0s"},
		{"-reps", "0"},
		{"-lease", "1ms", "-cs", "5ms"},
		{"-libs", "redsync,nosuchlock"},
		{"-libs", ","},
		{"-suite", "-watchdog"},
		{"stray"},
		{"-nosuchflag"},
	} {
		if _, err := parseFlags(args); !errors.Is(err, ErrUsage) {
			t.Errorf("parseFlags(%q): %v, want ErrUsage", args, err)
		}
	}
}

func TestGetRedisRefusesRemote(t *testing.T) {
	for _, addr := range []string{"10.0.0.1:6379", "redis.example:6379", "nohostport"} {
		if _, _, _, err := getRedis(t.Context(), addr); err == nil {
			t.Errorf("getRedis(%q) accepted it", addr)
		}
	}
	if _, _, _, err := getRedis(t.Context(), "10.0.0.1:6379"); !errors.Is(err, ErrNotLoopback) {
		t.Errorf("getRedis(10.0.0.1:6379): %v, want ErrNotLoopback", err)
	}
}
