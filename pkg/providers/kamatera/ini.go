package kamatera

import (
	"bytes"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The cloud config is the INI dialect cluster-autoscaler reads with gcfg (a
// git-config variant). Generic INI readers disagree with it on the points
// below, and a file that works with cluster-autoscaler must mean the same
// here, so this is a small reader of exactly that dialect:
//
//   - `;` and `#` start a comment, on a line of their own or after a value
//     (so an unquoted `#` inside a value ends it: quote such values);
//   - values may be quoted in whole or in part (`a"b c"d` is `ab cd`); inside
//     quotes `\\`, `\"`, `\n` and `\t` are the only escapes; outside quotes a
//     `\` must end the line and continues the value on the next one;
//   - whitespace around a value is dropped, whitespace inside it is kept;
//   - section and key names are case-insensitive, subsection names are not;
//   - a key with no `=` at all is "blank": true for a boolean, and for a
//     repeated key it clears the values given so far;
//   - a repeated key appends (multi-valued keys such as disk and network);
//     the cloud config built from it refuses any other key given twice, and
//     a section given twice, naming both lines.

// iniEntry is one header or key line of the file.
type iniEntry struct {
	line int
	// section is lower-cased; sub is the quoted subsection name, if any.
	section string
	sub     string
	hasSub  bool
	// key is empty for a section header; it is lower-cased.
	key string
	// blank reports a key written without `=`.
	blank bool
	value string
}

// iniSyntaxError is a malformed line.
type iniSyntaxError struct {
	line int
	msg  string
}

// parseINI splits src into entries; it stops at the first syntax error,
// since what follows a broken line can't be trusted.
func parseINI(src []byte) ([]iniEntry, *iniSyntaxError) {
	src = bytes.TrimPrefix(src, []byte("\xef\xbb\xbf"))
	if !utf8.Valid(src) {
		return nil, &iniSyntaxError{line: firstInvalidUTF8Line(src), msg: "the file is not valid UTF-8"}
	}
	if i := bytes.IndexByte(src, 0); i >= 0 {
		return nil, &iniSyntaxError{line: 1 + bytes.Count(src[:i], []byte("\n")), msg: "illegal NUL byte"}
	}
	lines := strings.Split(strings.ReplaceAll(string(src), "\r", ""), "\n")
	var (
		out          []iniEntry
		section, sub string
		hasSub       bool
		inSection    bool
	)
	for i := 0; i < len(lines); i++ {
		lineNo := i + 1
		s := strings.TrimLeft(lines[i], " \t")
		switch {
		case s == "" || s[0] == ';' || s[0] == '#':
			continue
		case s[0] == '[':
			name, subName, has, err := parseHeader(s)
			if err != "" {
				return nil, &iniSyntaxError{line: lineNo, msg: err}
			}
			section, sub, hasSub, inSection = strings.ToLower(name), subName, has, true
			out = append(out, iniEntry{line: lineNo, section: section, sub: sub, hasSub: hasSub})
		default:
			key, rest := scanIdent(s)
			if key == "" {
				r, _ := utf8.DecodeRuneInString(s)
				return nil, &iniSyntaxError{line: lineNo, msg: fmt.Sprintf("expected a section header or a key, found %q", r)}
			}
			if !inSection {
				return nil, &iniSyntaxError{line: lineNo, msg: fmt.Sprintf("key %q comes before any section header", key)}
			}
			e := iniEntry{line: lineNo, section: section, sub: sub, hasSub: hasSub, key: strings.ToLower(key)}
			rest = strings.TrimLeft(rest, " \t")
			switch {
			case rest == "" || rest[0] == ';' || rest[0] == '#':
				e.blank = true
			case rest[0] != '=':
				return nil, &iniSyntaxError{line: lineNo, msg: fmt.Sprintf("expected '=' after key %q", key)}
			default:
				value, used, err := scanValue(rest[1:], lines[i+1:])
				if err != "" {
					return nil, &iniSyntaxError{line: lineNo, msg: fmt.Sprintf("key %q: %s", key, err)}
				}
				e.value = value
				i += used
			}
			out = append(out, e)
		}
	}
	return out, nil
}

func firstInvalidUTF8Line(src []byte) int {
	line := 1
	for len(src) > 0 {
		r, size := utf8.DecodeRune(src)
		if r == utf8.RuneError && size <= 1 {
			return line
		}
		if r == '\n' {
			line++
		}
		src = src[size:]
	}
	return line
}

func isIdentStart(r rune) bool { return unicode.IsLetter(r) }

func isIdentPart(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' }

// scanIdent reads a section or key name: a letter, then letters, digits or
// dashes.
func scanIdent(s string) (ident, rest string) {
	r, size := utf8.DecodeRuneInString(s)
	if !isIdentStart(r) {
		return "", s
	}
	i := size
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if !isIdentPart(r) {
			break
		}
		i += size
	}
	return s[:i], s[i:]
}

// parseHeader reads `[name]` or `[name "sub"]`, then only a comment.
func parseHeader(s string) (name, sub string, hasSub bool, errMsg string) {
	rest := strings.TrimLeft(s[1:], " \t")
	name, rest = scanIdent(rest)
	if name == "" {
		return "", "", false, "expected a section name after '['"
	}
	rest = strings.TrimLeft(rest, " \t")
	if strings.HasPrefix(rest, `"`) {
		var b strings.Builder
		closed := false
		i := 1
		for i < len(rest) {
			c := rest[i]
			if c == '"' {
				closed = true
				i++
				break
			}
			if c == '\\' {
				if i+1 >= len(rest) {
					break
				}
				r, ok := unescape(rest[i+1])
				if !ok {
					return "", "", false, `unknown escape sequence in the subsection name (use \\ or \")`
				}
				b.WriteByte(r)
				i += 2
				continue
			}
			b.WriteByte(c)
			i++
		}
		if !closed {
			return "", "", false, "the subsection name has no closing quote"
		}
		sub, hasSub = b.String(), true
		if sub == "" {
			return "", "", false, `empty subsection name (use [` + name + `] for none)`
		}
		rest = strings.TrimLeft(rest[i:], " \t")
	}
	if !strings.HasPrefix(rest, "]") {
		return "", "", false, "expected ']' to close the section header"
	}
	rest = strings.TrimLeft(rest[1:], " \t")
	if rest != "" && rest[0] != ';' && rest[0] != '#' {
		return "", "", false, "unexpected text after the section header"
	}
	return name, sub, hasSub, ""
}

func unescape(c byte) (byte, bool) {
	switch c {
	case '\\', '"':
		return c, true
	case 'n':
		return '\n', true
	case 't':
		return '\t', true
	}
	return 0, false
}

// scanValue reads a value starting just after '='. An unquoted backslash at
// the end of a line continues the value on the next line; used reports how
// many of next were consumed that way.
func scanValue(s string, next []string) (value string, used int, errMsg string) {
	s = strings.TrimLeft(s, " \t")
	var b strings.Builder
	// keep is the length of b up to the last character that is not trailing
	// unquoted whitespace.
	keep := 0
	inQuote := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case inQuote && c == '\\':
			if i+1 >= len(s) {
				return "", 0, "a quoted value can't continue onto the next line"
			}
			r, ok := unescape(s[i+1])
			if !ok {
				// the character is not quoted back: the value may be a secret
				return "", 0, `unknown escape sequence (inside quotes use \\, \", \n or \t)`
			}
			b.WriteByte(r)
			keep = b.Len()
			i++
		case c == '"':
			inQuote = !inQuote
			keep = b.Len()
		case !inQuote && (c == ';' || c == '#'):
			return b.String()[:keep], used, ""
		case !inQuote && c == '\\':
			if i != len(s)-1 {
				return "", 0, `an unquoted '\' must end the line (to continue the value) or be quoted`
			}
			if used >= len(next) {
				return "", 0, "the value continues past the end of the file"
			}
			// A continuation goes on with the next line as it is, leading
			// whitespace included.
			s = next[used]
			used++
			i = -1
		default:
			b.WriteByte(c)
			if inQuote || (c != ' ' && c != '\t') {
				keep = b.Len()
			}
		}
	}
	if inQuote {
		return "", 0, "the quoted value has no closing quote on this line"
	}
	return b.String()[:keep], used, ""
}
