package results

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestWriteRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.json")
	in := &File{
		Meta: Meta{Date: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC), Reps: 3, Scenarios: []Scenario{{Name: "a", Procs: 1, G: 1, Keys: 1}}},
		Results: []Result{
			{Lib: "latchkey", Scenario: "a", Figures: Figures{AcqPerS: 1234.5}, Min: Figures{AcqPerS: 1000}, Max: Figures{AcqPerS: 1300},
				Commands: map[string]Spread{"evalsha": {Median: 1, Min: 1, Max: 1.5}}},
			{Lib: "redsync", Scenario: "a", Setting: "delay random"},
			{Lib: "redsync", Scenario: "c", Setting: "delay random"},
		},
		Sweep: []Result{{Lib: "redsync", Scenario: "c", Setting: "delay 2ms", BackoffMS: 2}, {Lib: "redsync", Scenario: "d", BackoffMS: 2}},
		Idle: &Idle{Scenario: Scenario{Name: "f"}, Baseline: IdleResult{CPUMSPerS: Spread{Median: 1}},
			Results: []IdleResult{{Lib: "latchkey", CmdsPerS: Spread{Median: 0.5, Min: 0, Max: 1}}}},
		Fleet: &Fleet{Scenarios: []Scenario{{Name: "g", Procs: 4, G: 1, Keys: 1, CSUS: 5000}, {Name: "g", Procs: 16, G: 1, Keys: 1, CSUS: 5000}}, Reps: 1, DurS: 2,
			Results: []FleetResult{
				{Result: Result{Lib: "latchkey", Scenario: "g", Procs: 4, Figures: Figures{AcqPerS: 180}}, AttemptsPerAcq: &Spread{Median: 1.5, Min: 1.5, Max: 1.5},
					SubscribesPerAcq: Spread{Median: 0.9}, UnsubscribesPerAcq: Spread{Median: 0.8}},
				{Result: Result{Lib: "latchkey", Scenario: "g", Procs: 16, Figures: Figures{AcqPerS: 170}}},
				{Result: Result{Lib: "rueidislock", Scenario: "g", Procs: 4}},
			}},
		Watchdog: &Watchdog{Steps: []WatchdogStep{{Locks: 10000, CallsPerTick: 100}}},
	}
	if err := Write(path, in); err != nil {
		t.Fatal(err)
	}
	out, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Errorf("read back %+v, want %+v", out, in)
	}
	if r := out.Find("latchkey", "a"); r == nil || r.AcqPerS != 1234.5 {
		t.Errorf("Find(latchkey, a) = %+v", r)
	}
	if r := out.Find("latchkey", "b"); r != nil {
		t.Errorf("Find(latchkey, b) = %+v, want nil", r)
	}
	if r := out.Fleet.Find("latchkey", 16); r == nil || r.AcqPerS != 170 {
		t.Errorf("Fleet.Find(latchkey, 16) = %+v", r)
	}
	if r := out.Fleet.Find("rueidislock", 4); r == nil || r.AttemptsPerAcq != nil {
		t.Errorf("Fleet.Find(rueidislock, 4) = %+v, want a result without attempts", r)
	}
	if r := out.Fleet.Find("rueidislock", 16); r != nil {
		t.Errorf("Fleet.Find(rueidislock, 16) = %+v, want nil", r)
	}
	if rs := out.Settings("redsync", "c"); len(rs) != 2 || rs[0].Setting != "delay random" || rs[1].BackoffMS != 2 {
		t.Errorf("Settings(redsync, c) = %+v, want the default, then the 2ms sweep point", rs)
	}
}

func TestReadRejects(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{"garbage.json": "{", "empty.json": `{"results": []}`} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Read(p); !errors.Is(err, ErrBadFile) {
			t.Errorf("Read(%s): %v, want ErrBadFile", name, err)
		}
	}
	// A run of scenario g alone has fleet results only.
	p := filepath.Join(dir, "fleet.json")
	if err := os.WriteFile(p, []byte(`{"results": [], "fleet": {"results": [{"lib": "latchkey", "procs": 4}]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if f, err := Read(p); err != nil || f.Fleet.Find("latchkey", 4) == nil {
		t.Errorf("Read of a fleet-only file: %v, %v", f, err)
	}
}

func TestReadMarket(t *testing.T) {
	dir := t.TempDir()
	m, err := ReadMarket(filepath.Join(dir, "absent.json"))
	if m != nil || err != nil {
		t.Errorf("absent market.json: %v, %v; want nil, nil", m, err)
	}
	p := filepath.Join(dir, "market.json")
	body := `[{"variant": "watch", "sellers": 5, "buyers": 1, "duration_s": 60, "listed": 10, "bought": 9, "retries": 4, "p50_buy_us": 1.5, "p99_buy_us": 9, "errors": 0}]`
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err = ReadMarket(p)
	want := []Market{{Variant: "watch", Sellers: 5, Buyers: 1, DurationS: 60, Listed: 10, Bought: 9, Retries: 4, P50BuyUS: 1.5, P99BuyUS: 9}}
	if err != nil || !reflect.DeepEqual(m, want) {
		t.Errorf("ReadMarket = %+v, %v; want %+v", m, err, want)
	}
	if err := os.WriteFile(p, []byte(`{"variant": "watch"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadMarket(p); !errors.Is(err, ErrBadFile) {
		t.Errorf("ReadMarket of an object: %v, want ErrBadFile", err)
	}
}
