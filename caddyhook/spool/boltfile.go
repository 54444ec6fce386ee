package spool

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
)

// This file reads bbolt's on-disk format (version 2) with plain reads, never
// through a memory map, to decide whether bbolt can open a file safely:
// bbolt trusts its pages, so a garbage page panics inside bolt.Open and a
// truncated file faults (SIGBUS) on the first access past its end, neither
// of which a caller can recover from. It also salvages the records of a
// file that fails the check. Only what the check needs is modelled.

// Format constants (go.etcd.io/bbolt/internal/common).
const (
	boltMagic      = 0xED0CDAED
	boltVersion    = 2
	pageHeaderSize = 16 // id u64, flags u16, count u16, overflow u32
	elemSize       = 16 // branch: pos u32, ksize u32, pgid u64; leaf: flags u32, pos u32, ksize u32, vsize u32
	metaOffset     = pageHeaderSize
	metaSumLen     = 56 // bytes of the meta struct the checksum covers
	bucketHdrSize  = 16 // root pgid u64, sequence u64

	flagBranch   = 0x01
	flagLeaf     = 0x02
	flagMeta     = 0x04
	flagFreelist = 0x10
	leafBucket   = 0x01

	noFreelist   = ^uint64(0)
	maxTreeDepth = 64
)

// errNotBolt marks a file that is not a bbolt database at all.
var errNotBolt = errors.New("not a bbolt database")

// boltMeta is one meta page.
type boltMeta struct {
	page     int // 0 or 1
	pageSize int64
	root     uint64 // root bucket's page
	freelist uint64
	hwm      uint64 // high-water mark: pages in use
	txid     uint64
	err      error // why the page is invalid; nil when valid
}

// parseMeta parses a meta page (header included).
func parseMeta(b []byte, page int) boltMeta {
	m := boltMeta{page: page}
	if len(b) < metaOffset+metaSumLen+8 {
		m.err = errors.New("short")
		return m
	}
	le := binary.LittleEndian
	mb := b[metaOffset:]
	sum := fnv.New64a()
	_, _ = sum.Write(mb[:metaSumLen])
	switch {
	case le.Uint32(mb) != boltMagic:
		m.err = errors.New("bad magic")
	case le.Uint32(mb[4:]) != boltVersion:
		m.err = fmt.Errorf("format version %d", le.Uint32(mb[4:]))
	case le.Uint64(mb[56:]) != sum.Sum64():
		m.err = errors.New("checksum mismatch")
	}
	m.pageSize = int64(le.Uint32(mb[8:]))
	m.root = le.Uint64(mb[16:])
	m.freelist = le.Uint64(mb[32:])
	m.hwm = le.Uint64(mb[40:])
	m.txid = le.Uint64(mb[48:])
	if m.err == nil && (m.pageSize < 512 || m.pageSize > 1<<24 || m.pageSize&(m.pageSize-1) != 0) {
		m.err = fmt.Errorf("page size %d", m.pageSize)
	}
	return m
}

// boltFile is a bbolt file read with ReadAt.
type boltFile struct {
	r        io.ReaderAt
	size     int64
	pageSize int64
	metas    [2]boltMeta
}

// readBoltFile reads both meta pages the way bbolt does: page 0 first;
// when it is invalid, the page size comes from page 1, searched at every
// power of two from 1 KiB.
func readBoltFile(r io.ReaderAt, size int64) (*boltFile, error) {
	f := &boltFile{r: r, size: size}
	buf := make([]byte, 4096)
	n, _ := r.ReadAt(buf, 0)
	f.metas[0] = parseMeta(buf[:n], 0)
	if f.metas[0].err == nil {
		f.pageSize = f.metas[0].pageSize
	} else {
		for i := 0; i <= 14; i++ {
			pos := int64(1024) << i
			if pos >= size-1024 {
				break
			}
			n, _ := r.ReadAt(buf, pos)
			if m := parseMeta(buf[:n], 1); m.err == nil && m.pageSize == pos {
				f.pageSize = pos
				break
			}
		}
	}
	if f.pageSize == 0 {
		return nil, fmt.Errorf("%w: neither meta page is valid (page 0: %v)", errNotBolt, f.metas[0].err)
	}
	n, _ = r.ReadAt(buf[:min(int64(len(buf)), f.pageSize)], f.pageSize)
	f.metas[1] = parseMeta(buf[:n], 1)
	if f.metas[1].err == nil && f.metas[1].pageSize != f.pageSize {
		f.metas[1].err = fmt.Errorf("page size %d, page 0 says %d", f.metas[1].pageSize, f.pageSize)
	}
	if f.metas[0].err == nil && f.metas[0].pageSize != f.pageSize {
		f.metas[0].err = fmt.Errorf("page size %d", f.metas[0].pageSize)
	}
	if f.metas[0].err != nil && f.metas[1].err != nil {
		return nil, fmt.Errorf("%w: neither meta page is valid (page 0: %v; page 1: %v)", errNotBolt, f.metas[0].err, f.metas[1].err)
	}
	return f, nil
}

// current is the meta bbolt uses: the valid one with the higher txid.
func (f *boltFile) current() boltMeta {
	a, b := f.metas[0], f.metas[1]
	if b.txid > a.txid {
		a, b = b, a
	}
	if a.err == nil {
		return a
	}
	return b
}

// check verifies everything bbolt reads when it opens the file and walks
// its buckets: the size against the high-water mark, the freelist page,
// and every page reachable from the root (ids in range and unique, header
// ids, page types, element bounds, key order, nesting depth).
func (f *boltFile) check(m boltMeta) error {
	if err := f.checkSize(m); err != nil {
		return err
	}
	if m.freelist != noFreelist {
		p, err := f.page(m.freelist, m.hwm)
		if err != nil {
			return fmt.Errorf("freelist: %w", err)
		}
		if err := checkFreelist(p, m.hwm); err != nil {
			return fmt.Errorf("freelist page %d: %w", m.freelist, err)
		}
	}
	return f.walk(m, true, nil)
}

// checkSize verifies that every page below m's high-water mark is in the
// file.
func (f *boltFile) checkSize(m boltMeta) error {
	if m.hwm < 2 || m.root < 2 || m.root >= m.hwm {
		return fmt.Errorf("meta page %d: root page %d outside 2..%d", m.page, m.root, m.hwm)
	}
	if need := int64(m.hwm) * f.pageSize; m.hwm > uint64(1<<62)/uint64(f.pageSize) || f.size < need {
		return fmt.Errorf("truncated: the file has %d bytes, its last transaction (%d) uses %d pages of %d bytes",
			f.size, m.txid, m.hwm, f.pageSize)
	}
	return nil
}

// page reads page id with its overflow pages; ids at or above hwm, and
// pages reaching past hwm or the end of the file, are errors.
func (f *boltFile) page(id, hwm uint64) ([]byte, error) {
	if id < 2 || id >= hwm {
		return nil, fmt.Errorf("page %d outside 2..%d", id, hwm)
	}
	hdr := make([]byte, pageHeaderSize)
	if _, err := f.r.ReadAt(hdr, int64(id)*f.pageSize); err != nil {
		return nil, fmt.Errorf("page %d: %w", id, err)
	}
	overflow := uint64(binary.LittleEndian.Uint32(hdr[12:]))
	if id+overflow >= hwm {
		return nil, fmt.Errorf("page %d: %d overflow pages reach past the high-water mark %d", id, overflow, hwm)
	}
	b := make([]byte, int64(1+overflow)*f.pageSize)
	if _, err := f.r.ReadAt(b, int64(id)*f.pageSize); err != nil {
		return nil, fmt.Errorf("page %d: %w", id, err)
	}
	if got := binary.LittleEndian.Uint64(b); got != id {
		return nil, fmt.Errorf("page %d identifies as page %d", id, got)
	}
	return b, nil
}

// checkFreelist verifies a freelist page.
func checkFreelist(p []byte, hwm uint64) error {
	le := binary.LittleEndian
	if le.Uint16(p[8:]) != flagFreelist {
		return fmt.Errorf("type %#x, want freelist", le.Uint16(p[8:]))
	}
	start, count := pageHeaderSize, uint64(le.Uint16(p[10:]))
	if count == 0xFFFF {
		count, start = le.Uint64(p[pageHeaderSize:]), pageHeaderSize+8
	}
	if count > uint64(len(p)-start)/8 {
		return fmt.Errorf("%d ids do not fit", count)
	}
	for i := uint64(0); i < count; i++ {
		if id := le.Uint64(p[start+8*int(i):]); id < 2 || id >= hwm {
			return fmt.Errorf("free page %d outside 2..%d", id, hwm)
		}
	}
	return nil
}

// walkItem is a page still to visit: a page id, or an inline bucket's page.
type walkItem struct {
	id       uint64
	inline   []byte
	bucket   string // name of the top-level bucket the page belongs to; "" for the root
	depth    int
	min, max []byte // the keys below this page are >= min and < max (nil: unbounded)
}

// walk visits every page reachable from m's root bucket. In strict mode
// the first problem is returned; otherwise a damaged page (and what hangs
// below it) is skipped and the walk goes on, so that salvage gets every
// readable record. visit, when set, receives each key and value of a leaf
// inside a top-level bucket.
func (f *boltFile) walk(m boltMeta, strict bool, visit func(bucket string, k, v []byte)) error {
	var problems []error
	fail := func(err error) bool {
		problems = append(problems, err)
		return strict
	}
	seen := map[uint64]bool{}
	stack := []walkItem{{id: m.root}}
	// Every element of a sound file occupies its own 16 bytes of it; more
	// means inline buckets that overlap, which would be walked over and
	// over (exponentially).
	budget := f.size/elemSize + 16
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if it.depth > maxTreeDepth {
			if fail(fmt.Errorf("page %d: nested deeper than %d", it.id, maxTreeDepth)) {
				break
			}
			continue
		}
		p := it.inline
		if p == nil {
			var err error
			if p, err = f.page(it.id, m.hwm); err != nil {
				if fail(err) {
					break
				}
				continue
			}
			if err := markPages(seen, it.id, uint64(len(p))/uint64(f.pageSize)); err != nil {
				if fail(err) {
					break
				}
				continue
			}
		}
		children, err := parseTreePage(p, it, visit)
		if err != nil {
			if fail(fmt.Errorf("page %d: %w", it.id, err)) {
				break
			}
			continue
		}
		if budget -= int64(len(children)) + 1; budget < 0 {
			problems = append(problems, errors.New("more elements than the file can hold: overlapping buckets"))
			break
		}
		stack = append(stack, children...)
	}
	return errors.Join(problems...)
}

// markPages records that pages id.. id+n-1 are in use; one already in use
// is an error (bbolt panics on a page referenced twice).
func markPages(seen map[uint64]bool, id, n uint64) error {
	for i := id; i < id+n; i++ {
		if seen[i] {
			return fmt.Errorf("page %d: referenced twice", i)
		}
	}
	for i := id; i < id+n; i++ {
		seen[i] = true
	}
	return nil
}

// parseTreePage checks a branch or leaf page and returns the pages below
// it; leaf records inside a top-level bucket go to visit.
func parseTreePage(p []byte, it walkItem, visit func(bucket string, k, v []byte)) ([]walkItem, error) {
	le := binary.LittleEndian
	if len(p) < pageHeaderSize {
		return nil, errors.New("shorter than a page header")
	}
	flags, count := le.Uint16(p[8:]), int(le.Uint16(p[10:]))
	if flags != flagBranch && flags != flagLeaf {
		return nil, fmt.Errorf("type %#x is neither branch nor leaf", flags)
	}
	if pageHeaderSize+count*elemSize > len(p) {
		return nil, fmt.Errorf("%d elements do not fit", count)
	}
	var (
		children []walkItem
		prev     []byte
	)
	for i := range count {
		e := p[pageHeaderSize+i*elemSize:]
		eOff := pageHeaderSize + i*elemSize
		var pos, ksize, vsize uint64
		switch flags {
		case flagBranch:
			pos, ksize = uint64(le.Uint32(e)), uint64(le.Uint32(e[4:]))
		default:
			pos, ksize, vsize = uint64(le.Uint32(e[4:])), uint64(le.Uint32(e[8:])), uint64(le.Uint32(e[12:]))
		}
		kStart := uint64(eOff) + pos
		if kStart+ksize+vsize > uint64(len(p)) {
			return nil, fmt.Errorf("element %d reaches past the page", i)
		}
		key := p[kStart : kStart+ksize]
		switch {
		case i > 0 && bytes.Compare(prev, key) >= 0:
			return nil, fmt.Errorf("element %d: keys out of order", i)
		case it.min != nil && bytes.Compare(key, it.min) < 0, it.max != nil && bytes.Compare(key, it.max) >= 0:
			return nil, fmt.Errorf("element %d: key outside the range of its parent", i)
		}
		prev = key
		if flags == flagBranch {
			if n := len(children); n > 0 {
				children[n-1].max = key
			}
			children = append(children, walkItem{id: le.Uint64(e[8:]), bucket: it.bucket, depth: it.depth + 1, min: key, max: it.max})
			continue
		}
		val := p[kStart+ksize : kStart+ksize+vsize]
		if le.Uint32(e)&leafBucket == 0 {
			if it.bucket == "" {
				return nil, fmt.Errorf("element %d: a top-level key that is not a bucket", i)
			}
			if visit != nil {
				visit(it.bucket, key, val)
			}
			continue
		}
		if len(val) < bucketHdrSize {
			return nil, fmt.Errorf("element %d: bucket header of %d bytes", i, len(val))
		}
		name := it.bucket
		if name == "" {
			name = string(key)
		}
		child := walkItem{id: le.Uint64(val), bucket: name, depth: it.depth + 1}
		if child.id == 0 {
			child.inline = val[bucketHdrSize:]
		}
		children = append(children, child)
	}
	if flags == flagBranch && count == 0 {
		return nil, errors.New("empty branch")
	}
	return children, nil
}
