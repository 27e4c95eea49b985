package cparse

import "testing"

func TestStrtoul(t *testing.T) {
	cases := []struct {
		in   string
		v    uint64
		used int
	}{
		{"", 0, 0},
		{"abc", 0, 0},
		{"42", 42, 2},
		{"  +7x", 7, 4},
		{"-1", ^uint64(0), 2},
		{"99999999999999999999999", ^uint64(0), 23},
		{"-99999999999999999999999", ^uint64(0), 24},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			v, n := Strtoul(c.in)
			if v != c.v || n != c.used {
				t.Fatalf("Strtoul(%q) = %d, %d; want %d, %d", c.in, v, n, c.v, c.used)
			}
		})
	}
}

func TestAtoi(t *testing.T) {
	for in, want := range map[string]int{"": 0, " 12": 12, "-5k": -5, "x": 0, "+3": 3} {
		if got := Atoi(in); got != want {
			t.Errorf("Atoi(%q) = %d, want %d", in, got, want)
		}
	}
}
