package sandbox

import (
	"encoding/binary"
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// The default seccomp filter of a bubblewrap sandbox (bubblewrap's --seccomp): it refuses the
// kernel's interfaces that no environment needs and that widen what a process without
// capabilities can reach: new user namespaces (in which it would have capabilities again, by
// clone, unshare or clone3), keyrings, eBPF, perf events, userfaultfd, io_uring, module and kexec
// loading, mounts, and handles that open files by inode. The rest of the kernel is allowed. A
// refused call fails with EPERM (clone3 with ENOSYS, so that libc falls back to clone, whose flags
// the filter can read); a call of another architecture's ABI (x32 on amd64) kills the process.
//
// The container provider's sandboxes get their engine's default profile, which refuses the same.

// refusedSyscalls fail with EPERM in a sandbox.
var refusedSyscalls = []uintptr{
	unix.SYS_UNSHARE, unix.SYS_SETNS,
	unix.SYS_KEYCTL, unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY,
	unix.SYS_BPF, unix.SYS_PERF_EVENT_OPEN, unix.SYS_USERFAULTFD,
	unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER,
	unix.SYS_INIT_MODULE, unix.SYS_FINIT_MODULE, unix.SYS_DELETE_MODULE,
	unix.SYS_KEXEC_LOAD, unix.SYS_KEXEC_FILE_LOAD, unix.SYS_REBOOT,
	unix.SYS_MOUNT, unix.SYS_UMOUNT2, unix.SYS_PIVOT_ROOT, unix.SYS_OPEN_TREE, unix.SYS_MOVE_MOUNT,
	unix.SYS_FSOPEN, unix.SYS_FSCONFIG, unix.SYS_FSMOUNT, unix.SYS_FSPICK, unix.SYS_MOUNT_SETATTR,
	unix.SYS_NAME_TO_HANDLE_AT, unix.SYS_OPEN_BY_HANDLE_AT,
	unix.SYS_SWAPON, unix.SYS_SWAPOFF, unix.SYS_ACCT, unix.SYS_QUOTACTL, unix.SYS_SYSLOG,
}

// BPF and seccomp constants (linux/filter.h, linux/seccomp.h, linux/audit.h).
const (
	bpfLdWAbs  = 0x20 // BPF_LD | BPF_W | BPF_ABS
	bpfJeqK    = 0x15 // BPF_JMP | BPF_JEQ | BPF_K
	bpfJgeK    = 0x35 // BPF_JMP | BPF_JGE | BPF_K
	bpfJsetK   = 0x45 // BPF_JMP | BPF_JSET | BPF_K
	bpfRetK    = 0x06 // BPF_RET | BPF_K
	retAllow   = 0x7fff0000
	retErrno   = 0x00050000
	retKillPro = 0x80000000

	offNr   = 0  // seccomp_data.nr
	offArch = 4  // seccomp_data.arch
	offArg0 = 16 // seccomp_data.args[0], its low 32 bits (little-endian)

	x32Bit = 0x40000000 // __X32_SYSCALL_BIT
)

// auditArch is this architecture's AUDIT_ARCH_ value.
func auditArch() (uint32, error) {
	switch runtime.GOARCH {
	case "amd64":
		return 0xc000003e, nil
	case "arm64":
		return 0xc00000b7, nil
	}
	return 0, fmt.Errorf("no seccomp filter for %s", runtime.GOARCH)
}

type sockFilter struct {
	code   uint16
	jt, jf uint8
	k      uint32
}

// seccompProgram is the filter as bubblewrap reads it: struct sock_filter entries, in this
// machine's byte order.
func seccompProgram() ([]byte, error) {
	arch, err := auditArch()
	if err != nil {
		return nil, err
	}
	ret := func(k uint32) sockFilter { return sockFilter{code: bpfRetK, k: k} }
	prog := []sockFilter{
		{code: bpfLdWAbs, k: offArch},
		{code: bpfJeqK, jt: 1, k: arch},
		ret(retKillPro),
		{code: bpfLdWAbs, k: offNr},
	}
	if runtime.GOARCH == "amd64" {
		prog = append(prog, sockFilter{code: bpfJgeK, jf: 1, k: x32Bit}, ret(retKillPro))
	}
	for _, nr := range refusedSyscalls {
		prog = append(prog, sockFilter{code: bpfJeqK, jf: 1, k: uint32(nr)}, ret(retErrno|uint32(unix.EPERM)))
	}
	prog = append(prog,
		sockFilter{code: bpfJeqK, jf: 1, k: unix.SYS_CLONE3}, ret(retErrno|uint32(unix.ENOSYS)),
		// clone: refused only when it asks for a new user namespace.
		sockFilter{code: bpfJeqK, jf: 4, k: unix.SYS_CLONE},
		sockFilter{code: bpfLdWAbs, k: offArg0},
		sockFilter{code: bpfJsetK, jf: 1, k: unix.CLONE_NEWUSER},
		ret(retErrno|uint32(unix.EPERM)),
		ret(retAllow),
		ret(retAllow),
	)
	out := make([]byte, 0, 8*len(prog))
	for _, f := range prog {
		out = binary.NativeEndian.AppendUint16(out, f.code)
		out = append(out, f.jt, f.jf)
		out = binary.NativeEndian.AppendUint32(out, f.k)
	}
	return out, nil
}

// seccompPipe is a pipe whose read end bubblewrap reads the filter from (--seccomp): the filter is
// written whole, the write end closed.
func seccompPipe(prog []byte) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	_, err = w.Write(prog) // a few hundred bytes: within any pipe's buffer
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("seccomp filter: %w", err)
	}
	return r, nil
}
