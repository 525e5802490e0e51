//go:build race

package main

// Under go test -race the binary the tests run is race-checked too: a race
// in it prints a report and changes its exit status (66), which the tests
// see. The race runtime's default pause of a second at exit is turned off,
// or the tests' hundred-odd runs would take minutes.
func init() {
	buildFlags = append(buildFlags, "-race")
	childEnv = append(childEnv, "GORACE=atexit_sleep_ms=0")
}
