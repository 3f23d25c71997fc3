//go:build !amd64 && !arm64

package sandbox

// sysSetns is 0 where its number is not known here: no listener is made inside a sandbox.
const sysSetns = 0
