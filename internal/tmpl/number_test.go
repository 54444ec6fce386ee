package tmpl

import (
	"math"
	"strconv"
	"strings"
	"testing"
)

// tenth is a variable so that 0.1+0.2 is computed in float64, not exactly.
var tenth = 0.1

func TestAppendJSNumber(t *testing.T) {
	tests := []struct {
		in   float64
		want string
	}{
		{0, "0"},
		{math.Copysign(0, -1), "0"},
		{1, "1"},
		{-1, "-1"},
		{100, "100"},
		{1.5, "1.5"},
		{-1.5, "-1.5"},
		{0.1, "0.1"},
		{tenth + 2*tenth, "0.30000000000000004"},
		{1e20, "100000000000000000000"},
		{123456789012345680000, "123456789012345680000"},
		{1e21, "1e+21"},
		{1.2345e21, "1.2345e+21"},
		{-1e21, "-1e+21"},
		{9007199254740992, "9007199254740992"},
		{1 << 64, "18446744073709552000"},
		{0.000001, "0.000001"},
		{0.0000015, "0.0000015"},
		{1e-7, "1e-7"},
		{1.5e-7, "1.5e-7"},
		{123e-20, "1.23e-18"},
		{5e-324, "5e-324"},
		{math.MaxFloat64, "1.7976931348623157e+308"},
		{123.456, "123.456"},
		{1234567.125, "1234567.125"},
		{math.NaN(), "NaN"},
		{math.Inf(1), "Infinity"},
		{math.Inf(-1), "-Infinity"},
	}
	for _, tt := range tests {
		if got := string(appendJSNumber(nil, tt.in)); got != tt.want {
			t.Errorf("appendJSNumber(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestAppendJSONNumberNonFinite(t *testing.T) {
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if got := string(appendJSONNumber(nil, f)); got != "null" {
			t.Errorf("appendJSONNumber(%v) = %q, want null", f, got)
		}
	}
}

// checkJSNumber verifies the properties String(n) guarantees for finite f:
// it round-trips, and uses exponent form exactly outside [1e-6, 1e21).
func checkJSNumber(t *testing.T, f float64) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return
	}
	s := string(appendJSNumber(nil, f))
	back, err := strconv.ParseFloat(s, 64)
	if err != nil || back != f {
		t.Fatalf("appendJSNumber(%v) = %q, which parses back as %v (%v)", f, s, back, err)
	}
	abs := math.Abs(f)
	wantExp := f != 0 && (abs >= 1e21 || abs < 1e-6)
	if strings.Contains(s, "e") != wantExp {
		t.Fatalf("appendJSNumber(%v) = %q: exponent form %v, want %v", f, s, !wantExp, wantExp)
	}
	mantissa, _, _ := strings.Cut(s, "e")
	if strings.Contains(mantissa, ".") && strings.HasSuffix(mantissa, "0") {
		t.Fatalf("appendJSNumber(%v) = %q has a trailing zero in its fraction", f, s)
	}
}

func FuzzJSNumber(f *testing.F) {
	for _, seed := range []float64{0, 1, 1.5, 1e21, 1e-7, 5e-324, math.MaxFloat64, 123456.789} {
		f.Add(seed)
	}
	f.Fuzz(checkJSNumber)
}
