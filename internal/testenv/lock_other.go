//go:build !unix

package testenv

// LockFile does not lock where flock is missing: run such tests one package at a time.
func LockFile(string) (func(), error) { return func() {}, nil }
