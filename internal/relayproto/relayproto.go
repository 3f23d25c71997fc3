// Package relayproto is what proctor-relay (cmd/proctor-relay) and the sandbox providers that
// run it agree on: its command line, the environment variable that carries its token, its
// greeting, and how it says that its lifeline stopped the command. It uses the standard library
// only, so that the relay stays a small static program.
package relayproto

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"time"
)

const (
	// AcceptPrefix marks a TARGET that is an address the relay listens on for the worker's
	// connections (accept:HOST:PORT), rather than a unix socket it dials.
	AcceptPrefix = "accept:"
	// TokenEnv carries the token of an accept: relay; the relay keeps it from the command.
	TokenEnv = "PROCTOR_RELAY_TOKEN"
	// LifelineFlag makes the relay's stdin the worker's hold on the command.
	LifelineFlag = "--lifeline"
	// LifelineGrace is how long a command whose lifeline ended has between SIGTERM and SIGKILL.
	LifelineGrace = 5 * time.Second
	// StoppedStatus is the relay's exit status when its lifeline ended the command, and
	// LifelineEnded the line it writes to stderr then: together they say so unmistakably.
	StoppedStatus = 251
	LifelineEnded = "proctor-relay: the lifeline ended: the command is stopped"
	// CopyRootFlag makes the relay copy its container's root file system into an empty
	// directory and exit (proctor-relay --copy-root DIR): how a brought agent inside a pod's
	// environment is shown its own image (sandbox.Mount with an Image).
	CopyRootFlag = "--copy-root"
)

// Command is argv run behind the relay at relay: it listens on listen for argv's connections
// and relays them to target (a unix socket's path, or AcceptPrefix and an address), with
// LifelineFlag when lifeline.
func Command(relay string, lifeline bool, listen, target string, argv []string) []string {
	cmd := []string{relay}
	if lifeline {
		cmd = append(cmd, LifelineFlag)
	}
	return append(append(cmd, listen, target, "--"), argv...)
}

// Hello is an accept: relay's greeting on each of the worker's connections, which proves it
// knows token: an HMAC of it. The worker sends the token only once it has read this.
func Hello(token string) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("proctor-relay hello")) //nolint:errcheck // a hash's Write never fails
	return hex.EncodeToString(m.Sum(nil))
}
