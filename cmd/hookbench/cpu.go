package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// userHZ is the unit of the CPU times in /proc/<pid>/stat (USER_HZ, 100
// on every Linux architecture Go supports).
const userHZ = 100

// procCPU returns the user+system CPU time a process has used, all its
// threads included, from /proc/<pid>/stat.
func procCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(data)
}

// parseStatCPU reads utime and stime (fields 14 and 15) of a stat line.
// The command name (field 2) may hold spaces and parentheses, so fields
// are counted from its closing parenthesis.
func parseStatCPU(stat []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("stat: no command field")
	}
	f := bytes.Fields(stat[i+1:]) // f[0] is field 3
	if len(f) < 13 {
		return 0, errors.New("stat: too few fields")
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(string(s), 10, 64)
		if err != nil || n < 0 {
			return 0, errors.New("stat: bad CPU time field")
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// cpuClock reads the CPU time of the processes of a run: the ingress, the
// sink and hookbench itself (the load generator).
type cpuClock struct{ ingress, sink int }

// cpuTimes is a reading of cpuClock, or the difference of two.
type cpuTimes struct{ ingress, sink, client time.Duration }

// read returns the current times; a process that cannot be read counts 0.
func (c cpuClock) read() cpuTimes {
	var t cpuTimes
	t.ingress, _ = procCPU(c.ingress)
	t.sink, _ = procCPU(c.sink)
	t.client, _ = procCPU(os.Getpid())
	return t
}

// sub returns t − o.
func (t cpuTimes) sub(o cpuTimes) cpuTimes {
	return cpuTimes{t.ingress - o.ingress, t.sink - o.sink, t.client - o.client}
}

// add returns t + o.
func (t cpuTimes) add(o cpuTimes) cpuTimes {
	return cpuTimes{t.ingress + o.ingress, t.sink + o.sink, t.client + o.client}
}
