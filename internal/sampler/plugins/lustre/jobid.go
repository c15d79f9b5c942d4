package lustre

import (
	"errors"
	"fmt"
)

// JobIDFormat is the shape of the job ids the servers record, as the
// clients' jobid_name makes them (lctl set_param jobid_name=...): "%j"
// (jobid_var=SLURM_JOB_ID, the job id alone), "slurm.%j", "%j.%u", … It
// turns a Lustre job id into the Vigil (Slurm) job id: %j matches the
// digits of a Slurm job id, every other code (%e %g %h %H %p %u) one or
// more bytes, %% a percent sign, anything else itself.
type JobIDFormat struct {
	toks []tok
}

type tok struct {
	lit  string // a literal, when code is 0
	code byte
}

// ParseJobIDFormat checks format: exactly one %j and only the codes Lustre
// knows.
func ParseJobIDFormat(format string) (JobIDFormat, error) {
	var f JobIDFormat
	js := 0
	lit := []byte(nil)
	flush := func() {
		if len(lit) > 0 {
			f.toks = append(f.toks, tok{lit: string(lit)})
			lit = nil
		}
	}
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' {
			lit = append(lit, c)
			continue
		}
		if i+1 == len(format) {
			return f, errors.New("jobid_format ends with a lone %")
		}
		i++
		switch c = format[i]; c {
		case '%':
			lit = append(lit, '%')
		case 'j', 'e', 'g', 'h', 'H', 'p', 'u':
			flush()
			if c == 'j' {
				js++
			}
			if n := len(f.toks); n > 0 && f.toks[n-1].code != 0 {
				return f, fmt.Errorf("jobid_format %q: codes %%%c and %%%c touch, so the job id cannot be told apart", format, f.toks[n-1].code, c)
			}
			f.toks = append(f.toks, tok{code: c})
		default:
			return f, fmt.Errorf("jobid_format %q: unknown code %%%c (Lustre has %%e %%g %%h %%H %%j %%p %%u)", format, c)
		}
	}
	flush()
	codes := 0
	for _, t := range f.toks {
		if t.code != 0 {
			codes++
		}
	}
	// Matching backtracks over where each code ends: a bound on codes
	// bounds its cost on a hostile job id (once per new id).
	if codes > maxCodes {
		return f, fmt.Errorf("jobid_format %q has %d codes, at most %d are supported", format, codes, maxCodes)
	}
	if js != 1 {
		return f, fmt.Errorf("jobid_format %q must hold %%j exactly once", format)
	}
	return f, nil
}

// maxCodes bounds the codes of a format.
const maxCodes = 4

// maxJobIDLen bounds a job id read from job_stats (Lustre's is 32 bytes;
// escaped by 2.15, up to four times that).
const maxJobIDLen = 128

// Match returns the Slurm job id inside a Lustre job id, or ok false when
// id does not have the format's shape. It does not allocate.
func (f JobIDFormat) Match(id []byte) (job []byte, ok bool) {
	if len(id) > maxJobIDLen {
		return nil, false
	}
	return f.match(f.toks, id)
}

func (f JobIDFormat) match(toks []tok, s []byte) ([]byte, bool) {
	if len(toks) == 0 {
		return nil, len(s) == 0
	}
	t := toks[0]
	if t.code == 0 {
		if len(s) < len(t.lit) || string(s[:len(t.lit)]) != t.lit {
			return nil, false
		}
		return f.match(toks[1:], s[len(t.lit):])
	}
	// A code takes 1..len(s) bytes; %j only digits. The shortest that lets
	// the rest match wins, so "%j.%u" splits "1234.0" at the first dot.
	for n := 1; n <= len(s); n++ {
		if t.code == 'j' && (s[n-1] < '0' || s[n-1] > '9') {
			break
		}
		if j, ok := f.match(toks[1:], s[n:]); ok {
			if t.code == 'j' {
				return s[:n], true
			}
			return j, true
		}
	}
	return nil, false
}
