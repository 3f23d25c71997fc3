package sandbox

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/proctorhq/proctor/internal/relayproto"
)

// The relay (cmd/proctor-relay) gives a sandbox a listener inside without this process entering
// its network namespace: run in front of the sandbox's command, it listens on the sandbox's
// loopback and relays each connection to a unix socket of the worker's, which the sandbox sees
// through a read-only mount of the socket's directory. The container provider always works so,
// the process provider where it may not enter the namespace (a worker without CAP_SYS_ADMIN).

// RelaySocket is the socket's name in the directory ListenForRelay makes.
const RelaySocket = "port.sock"

// ListenForRelay listens on a unix socket, RelaySocket, in a fresh directory under parent (keep
// it short: a socket's path may be 108 bytes at most), hands the listener to l.Ready and returns
// the directory, which the caller mounts into the sandbox and removes once it has stopped.
// Whichever user the sandbox runs as may connect: the socket is reached only through that mount.
func ListenForRelay(parent string, l *Listen) (string, error) {
	dir, err := os.MkdirTemp(parent, "p-")
	if err != nil {
		return "", err
	}
	if err := ListenForRelayIn(dir, l); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

// ListenForRelayIn is ListenForRelay in dir, an existing directory (one a container was given
// before it was known what would listen there): a socket there before is replaced.
func ListenForRelayIn(dir string, l *Listen) error {
	if err := os.Remove(filepath.Join(dir, RelaySocket)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("listen for the sandbox: %w", err)
	}
	ln, err := listenUnix(dir)
	if err == nil {
		err = errors.Join(os.Chmod(dir, 0o711), os.Chmod(filepath.Join(dir, RelaySocket), 0o777))
		if err != nil {
			ln.Close()
		}
	}
	if err != nil {
		return fmt.Errorf("listen for the sandbox: %w", err)
	}
	l.Ready(ln)
	return nil
}

// RelayCommand is argv run behind the relay at relay (a path inside the sandbox): it listens on
// the sandbox's 127.0.0.1:port and relays to the socket in socketDir (also as the sandbox sees it).
func RelayCommand(relay, socketDir string, port int, argv []string) []string {
	return relayproto.Command(relay, false, fmt.Sprintf("127.0.0.1:%d", port), filepath.Join(socketDir, RelaySocket), argv)
}

// listenUnix listens on RelaySocket in dir. A deep dir's socket path would exceed 108 bytes: then
// it is bound through /proc/self/fd, a short name for the directory while it is open. The
// directory is removed whole, so the listener never unlinks its socket (a name through a closed
// descriptor could name another directory).
func listenUnix(dir string) (net.Listener, error) {
	path := filepath.Join(dir, RelaySocket)
	if len(path) > 100 {
		d, err := os.Open(dir)
		if err != nil {
			return nil, err
		}
		defer d.Close()
		path = fmt.Sprintf("/proc/self/fd/%d/%s", d.Fd(), RelaySocket)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	ln.SetUnlinkOnClose(false)
	return ln, nil
}
