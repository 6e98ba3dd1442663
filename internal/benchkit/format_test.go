package benchkit

import "testing"

func TestThousands(t *testing.T) {
	for v, want := range map[float64]string{
		0: "0", 7: "7", 999.4: "999", 999.6: "1,000", 1234: "1,234", 54353.2: "54,353",
		1234567: "1,234,567", -1234.4: "-1,234", -12: "-12", 5_350_786: "5,350,786",
	} {
		if got := Thousands(v); got != want {
			t.Errorf("Thousands(%v) = %q, want %q", v, got, want)
		}
	}
}
