package cluster

import (
	"encoding/binary"
	"errors"
)

// Every message the nodes exchange about the lockout and their
// membership, and every lock record, is one envelope: 'h', version 2, a
// kind, the node id (length and bytes), the sender's 8-byte member id,
// its uint64 message number, then the kind's payload:
//
//	'm' alive  (a heartbeat)  flags byte, int64 Unix ms sent
//	'x' leaving               flags byte, int64 Unix ms sent
//	'f' failures (to owner)   uint16 count, count × (16-byte address, int64 Unix ms)
//	'a' acknowledgement       uint64 number of the batch, uint16 count, count × (address, lock end ms)
//	'l' lock (bucket value)   uint16 count (1), (address, lock end ms)
//
// The engine seals every message and record. A receiver drops a message
// whose number is not above the last one of its sender and kind family
// (a replay). A lock record's number is its write time in Unix ms (0
// before v0.9.0), which its readers check against the engine's time of
// the write (Fresh). The 'm' and 'x' flags byte carries flagHello and,
// above it, the sender's cluster level (Gate). The envelope's format is
// the one every release since signed records writes and reads: releases
// before v0.9.0 ignore the number of a lock record and the flags' upper
// bits.
const (
	wireMagic   = 'h'
	wireVersion = 2 // internal/version.ClusterEnvelope
	kindAlive   = 'm'
	kindLeave   = 'x'
	kindFail    = 'f'
	kindAck     = 'a'
	kindLock    = 'l'
	recordSize  = 16 + 8
	maxNodeLen  = 64
	senderLen   = 8
	beatLen     = 1 + 8
)

// memberID identifies one member (a LockSync, a delivery node) while it
// runs: random, so that a restart is a new member.
type memberID [senderLen]byte

// wireRecord is one address and a time (a failure's, or a lock's end).
type wireRecord struct {
	addr Addr
	ms   int64
}

// wireMsg is a decoded message.
type wireMsg struct {
	kind   byte
	node   string
	sender memberID
	seq    uint64
	flags  byte         // alive, leaving
	ms     int64        // alive, leaving: when it was sent
	batch  uint64       // ack: the batch acknowledged
	recs   []wireRecord // failures, ack (locks), lock
}

var errWire = errors.New("malformed cluster message")

// newerWire is the version of a message of a newer envelope than this
// build reads (0: none, or not a cluster message at all).
func newerWire(b []byte) int {
	if len(b) >= 2 && b[0] == wireMagic && b[1] > wireVersion {
		return int(b[1])
	}
	return 0
}

// appendHeader encodes the envelope up to the payload.
func appendHeader(b []byte, kind byte, node string, sender memberID, seq uint64) []byte {
	node = node[:min(len(node), maxNodeLen)]
	b = append(b, wireMagic, wireVersion, kind, byte(len(node)))
	b = append(b, node...)
	b = append(b, sender[:]...)
	return binary.BigEndian.AppendUint64(b, seq)
}

// appendRecords encodes a count and records.
func appendRecords(b []byte, recs []wireRecord) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(recs)))
	for _, r := range recs {
		b = append(b, r.addr[:]...)
		b = binary.BigEndian.AppendUint64(b, uint64(r.ms))
	}
	return b
}

// appendBeat encodes an alive or leaving message's payload.
func appendBeat(b []byte, flags byte, ms int64) []byte {
	b = append(b, flags)
	return binary.BigEndian.AppendUint64(b, uint64(ms))
}

// parseWire decodes a message of any kind.
func parseWire(b []byte) (w wireMsg, err error) {
	if len(b) < 4 || b[0] != wireMagic || b[1] != wireVersion {
		return w, errWire
	}
	w.kind = b[2]
	nl := int(b[3])
	b = b[4:]
	if len(b) < nl+senderLen+8 {
		return w, errWire
	}
	w.node, b = string(b[:nl]), b[nl:]
	copy(w.sender[:], b)
	w.seq = binary.BigEndian.Uint64(b[senderLen:])
	b = b[senderLen+8:]
	switch w.kind {
	case kindAlive, kindLeave:
		if len(b) != beatLen {
			return w, errWire
		}
		w.flags, w.ms = b[0], int64(binary.BigEndian.Uint64(b[1:]))
		return w, nil
	case kindAck:
		if len(b) < 8 {
			return w, errWire
		}
		w.batch, b = binary.BigEndian.Uint64(b), b[8:]
	case kindFail, kindLock:
	default:
		return w, errWire
	}
	w.recs, err = parseRecords(b)
	if err == nil && w.kind == kindLock && len(w.recs) != 1 {
		err = errWire
	}
	return w, err
}

// parseRecords decodes a count and exactly that many records.
func parseRecords(b []byte) ([]wireRecord, error) {
	if len(b) < 2 {
		return nil, errWire
	}
	n := int(binary.BigEndian.Uint16(b))
	b = b[2:]
	if len(b) != n*recordSize {
		return nil, errWire
	}
	recs := make([]wireRecord, n)
	for i := range recs {
		copy(recs[i].addr[:], b[:16])
		recs[i].ms = int64(binary.BigEndian.Uint64(b[16:24]))
		b = b[recordSize:]
	}
	return recs, nil
}
