package snapshot

import (
	"bytes"
	"io"
)

// tailKeep is how much of the most recently read input a streamReader keeps
// for locating errors: a value the decoder is working on is shorter than
// this unless it is a single object of over a megabyte.
const tailKeep = 1 << 20

// streamReader feeds the snapshot decoder. It keeps what errors need (a line
// count and the tail of the input, so an offset can be turned into a line and
// column without holding the document) and refuses a number with a huge
// exponent as it streams past, before Kubernetes' quantity parser spends
// seconds on it.
type streamReader struct {
	r    io.Reader
	read int64 // bytes handed out so far
	size int64 // of the whole input, -1 when not known

	tail      []byte // the last bytes read; tail[0] is at offset tailStart
	tailStart int64
	// linesBefore and lastNLBefore describe the input before tailStart:
	// how many newlines it has, and the offset of its last one (-1: none).
	linesBefore  int
	lastNLBefore int64

	exp exponentScan
	err error
}

func newStreamReader(r io.Reader) *streamReader {
	return &streamReader{r: r, size: -1, lastNLBefore: -1, tail: make([]byte, 0, 64<<10)}
}

func (s *streamReader) Read(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n, err := s.r.Read(p)
	if n > 0 {
		chunk := p[:n]
		s.remember(chunk)
		base := s.read
		s.read += int64(n)
		if off, tok, found := s.exp.scan(chunk, base); found {
			// The decoder gets none of the value holding the number, so
			// it cannot parse it before it sees the error.
			s.err = s.hugeExponent(off, tok)
			return int(max(0, off-base)), s.err
		}
	}
	if err == io.EOF {
		if off, tok, found := s.exp.finish(); found {
			s.err = s.hugeExponent(off, tok)
			return int(max(0, off-(s.read-int64(n)))), s.err
		}
	}
	return n, err
}

func (s *streamReader) hugeExponent(off int64, tok string) error {
	line, col := s.position(off)
	return &DocumentError{Line: line, Column: col, Err: errHugeExponent(tok)}
}

func (s *streamReader) remember(chunk []byte) {
	s.tail = append(s.tail, chunk...)
	if len(s.tail) <= 2*tailKeep {
		return
	}
	cut := len(s.tail) - tailKeep
	dropped := s.tail[:cut]
	s.linesBefore += bytes.Count(dropped, []byte{'\n'})
	if i := bytes.LastIndexByte(dropped, '\n'); i >= 0 {
		s.lastNLBefore = s.tailStart + int64(i)
	}
	s.tail = s.tail[:copy(s.tail, s.tail[cut:])]
	s.tailStart += int64(cut)
}

// position turns an input offset into a 1-based line and column; 0, 0 when
// the offset is before the kept tail.
func (s *streamReader) position(off int64) (line, col int) {
	if off < s.tailStart {
		return 0, 0
	}
	off = min(off, s.tailStart+int64(len(s.tail)))
	before := s.tail[:off-s.tailStart]
	line = s.linesBefore + bytes.Count(before, []byte{'\n'}) + 1
	lastNL := s.lastNLBefore
	if i := bytes.LastIndexByte(before, '\n'); i >= 0 {
		lastNL = s.tailStart + int64(i)
	}
	return line, int(off - lastNL)
}

// skipSeparators returns the offset of the first byte at or after off that
// is not whitespace, a comma or a colon: where the next value starts.
func (s *streamReader) skipSeparators(off int64) int64 {
	for off >= s.tailStart && off < s.tailStart+int64(len(s.tail)) {
		switch s.tail[off-s.tailStart] {
		case ' ', '\t', '\r', '\n', ',', ':':
			off++
			continue
		}
		break
	}
	return off
}

// exponentScan finds, across chunk boundaries, the first JSON string or
// number whose whole text is a number with an exponent beyond maxExponent.
type exponentScan struct {
	inString, escaped bool
	inNumber          bool
	candidate         bool // the current string is still number-like
	tok               []byte
	tokStart          int64
}

func isNumberByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.' || c == 'e' || c == 'E'
}

// scan reads chunk, which starts at input offset base.
func (e *exponentScan) scan(chunk []byte, base int64) (int64, string, bool) {
	for i := 0; i < len(chunk); i++ {
		c := chunk[i]
		switch {
		case e.inString:
			if e.escaped {
				e.escaped = false
				continue
			}
			if !e.candidate {
				// Most strings are not numbers: jump to the next quote or
				// backslash.
				rest := chunk[i:]
				q := bytes.IndexByte(rest, '"')
				if q < 0 {
					q = len(rest)
				}
				if b := bytes.IndexByte(rest[:q], '\\'); b >= 0 {
					q = b
				}
				if q == len(rest) {
					return 0, "", false
				}
				i += q
				c = chunk[i]
			}
			switch {
			case c == '\\':
				e.escaped, e.candidate = true, false
			case c == '"':
				e.inString = false
				if e.candidate && bigExponent(e.tok) {
					return e.tokStart, string(e.tok), true
				}
			case e.candidate && isNumberByte(c):
				e.tok = append(e.tok, c)
			default:
				e.candidate = false
			}
		case e.inNumber:
			if isNumberByte(c) {
				e.tok = append(e.tok, c)
				continue
			}
			e.inNumber = false
			if bigExponent(e.tok) {
				return e.tokStart, string(e.tok), true
			}
			i-- // c starts something else
		case c == '"':
			e.inString, e.candidate = true, true
			e.tok, e.tokStart = e.tok[:0], base+int64(i)+1
		case c == '-' || c >= '0' && c <= '9':
			e.inNumber = true
			e.tok, e.tokStart = append(e.tok[:0], c), base+int64(i)
		}
	}
	return 0, "", false
}

// finish checks a number the input ended with.
func (e *exponentScan) finish() (int64, string, bool) {
	if e.inNumber && bigExponent(e.tok) {
		e.inNumber = false
		return e.tokStart, string(e.tok), true
	}
	return 0, "", false
}
