package jwtclaim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Int reads a JSON integer claim (jansson json_is_integer: no fraction, no
// exponent, no string).
func Int(raw json.RawMessage) (int64, error) {
	if len(raw) == 0 {
		return 0, errors.New("missing")
	}
	s := string(raw)
	if strings.ContainsAny(s, ".eE\"") {
		return 0, fmt.Errorf("%s is not an integer", s)
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s is not an integer", s)
	}
	return n, nil
}

// Uint32 reads an integer claim that must fit a uint32.
func Uint32(raw json.RawMessage) (uint32, error) {
	n, err := Int(raw)
	if err != nil {
		return 0, err
	}
	if n < 0 || n > int64(^uint32(0)) {
		return 0, fmt.Errorf("%d is out of range", n)
	}
	return uint32(n), nil
}

// String reads a JSON string claim; ok is false for anything else.
func String(raw json.RawMessage) (s string, ok bool) {
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// Identity is the "id" grant as a token carries it (identity_to_data).
// A name field is nil where the grant has no string for it: stock's
// data_get_string then leaves it NULL.
type Identity struct {
	Name, Gecos, Dir, Shell *string
	GIDs                    []uint32 // primary group first
	// GroupNames is set (one name per GIDs entry, empty but not nil for
	// an empty object) when the grant has "groups": {name: gid, ...},
	// which wins over "gids": [gid, ...].
	GroupNames []string
}

// ParseIdentity reads an "id" claim as extract_identity: the claim must be
// an object and its group ids integers; a name of the wrong type is NULL.
func ParseIdentity(raw json.RawMessage) (*Identity, error) {
	var f struct {
		Name, Gecos, Dir, Shell json.RawMessage
		Gids                    []json.RawMessage
		Groups                  json.RawMessage
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, fmt.Errorf("extract_identity: failed to decode id field: %w", err)
	}
	id := &Identity{}
	for _, p := range []struct {
		raw json.RawMessage
		dst **string
	}{{f.Name, &id.Name}, {f.Gecos, &id.Gecos}, {f.Dir, &id.Dir}, {f.Shell, &id.Shell}} {
		if s, ok := String(p.raw); ok {
			*p.dst = &s
		}
	}
	if len(f.Groups) > 0 && string(f.Groups) != "null" {
		names, gids, err := parseGroups(f.Groups)
		if err != nil {
			return nil, err
		}
		id.GroupNames, id.GIDs = names, gids
		return id, nil
	}
	for _, g := range f.Gids {
		n, err := Uint32(g)
		if err != nil {
			return nil, fmt.Errorf("extract_identity: gid %s: %w", g, err)
		}
		id.GIDs = append(id.GIDs, n)
	}
	return id, nil
}

// parseGroups reads {"name": gid, ...} keeping the order of the JSON.
func parseGroups(raw json.RawMessage) (names []string, gids []uint32, err error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, nil, errors.New("extract_identity: groups is not an object")
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, nil, fmt.Errorf("extract_identity: groups: %w", err)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, fmt.Errorf("extract_identity: groups: %w", err)
		}
		n, err := Uint32(v)
		if err != nil {
			return nil, nil, fmt.Errorf("extract_identity: group %v: %w", t, err)
		}
		names = append(names, t.(string))
		gids = append(gids, n)
	}
	if names == nil {
		names = []string{}
	}
	return names, gids, nil
}
