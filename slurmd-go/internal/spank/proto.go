package spank

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// MaxPacket is the largest packet either side sends (PROTOCOL.md).
const MaxPacket = 4 << 20

// packet is one message: a command and key=value fields, in order.
type packet struct {
	cmd    string
	fields []string // "key=value"
}

func newPacket(cmd string) *packet { return &packet{cmd: cmd} }

func (p *packet) add(key, value string) *packet {
	p.fields = append(p.fields, key+"="+value)
	return p
}

func (p *packet) addU(key string, v uint64) *packet { return p.add(key, strconv.FormatUint(v, 10)) }

func (p *packet) encode() ([]byte, error) {
	var b bytes.Buffer
	for _, f := range append([]string{p.cmd}, p.fields...) {
		if strings.IndexByte(f, 0) >= 0 {
			return nil, fmt.Errorf("spank: %s: field with a NUL byte", p.cmd)
		}
		b.WriteString(f)
		b.WriteByte(0)
	}
	if b.Len() > MaxPacket {
		return nil, fmt.Errorf("spank: %s: %d bytes, over %d", p.cmd, b.Len(), MaxPacket)
	}
	return b.Bytes(), nil
}

func decodePacket(b []byte) (*packet, error) {
	if len(b) == 0 || b[len(b)-1] != 0 {
		return nil, fmt.Errorf("spank: malformed packet (%d bytes, not NUL-terminated)", len(b))
	}
	parts := strings.Split(string(b[:len(b)-1]), "\x00")
	return &packet{cmd: parts[0], fields: parts[1:]}, nil
}

// get is the first value of key.
func (p *packet) get(key string) string {
	for _, f := range p.fields {
		if k, v, _ := strings.Cut(f, "="); k == key {
			return v
		}
	}
	return ""
}

// all is every value of key, in order.
func (p *packet) all(key string) []string {
	var out []string
	for _, f := range p.fields {
		if k, v, _ := strings.Cut(f, "="); k == key {
			out = append(out, v)
		}
	}
	return out
}

func (p *packet) int(key string) (int64, error) {
	v := p.get(key)
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("spank: %s: %s=%q: %w", p.cmd, key, v, err)
	}
	return n, nil
}
