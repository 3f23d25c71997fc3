// Package procfs reads what this host's /proc says of its processes: which there are, and the
// fields of their stat files. The sandbox provider finds a sandbox's processes with it, and the
// shell server inside a sandbox the processes an agent left behind.
package procfs

import (
	"os"
	"strconv"
	"strings"
)

// Pids lists the pids in /proc for which keep is true.
func Pids(keep func(pid int) bool) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		if keep(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// Stat is /proc/<pid>/stat's fields after the command's name: state, ppid, pgrp, ...; none
// when pid is gone.
func Stat(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	// "pid (comm) state ppid pgrp ..."; comm may hold spaces and parens.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(b[i+1:]))
}

// Parent is pid's parent's pid and pid's state ("R", "S", "Z", …); -1 and "" when pid is gone.
func Parent(pid int) (int, string) {
	f := Stat(pid)
	if len(f) < 2 {
		return -1, ""
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return -1, ""
	}
	return ppid, f[0]
}

// Descendants are pid's living descendants (children first, then theirs), as /proc says now.
func Descendants(pid int) []int {
	children := map[int][]int{}
	Pids(func(p int) bool {
		if ppid, state := Parent(p); ppid > 0 && state != "Z" {
			children[ppid] = append(children[ppid], p)
		}
		return false
	})
	var out []int
	for queue := children[pid]; len(queue) > 0; queue = queue[1:] {
		out = append(out, queue[0])
		queue = append(queue, children[queue[0]]...)
	}
	return out
}
