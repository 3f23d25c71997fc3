//go:build !unix

package testenv

// lockFile does not lock where flock is missing: run such tests one package at a time.
func lockFile(string) (func(), error) { return func() {}, nil }
