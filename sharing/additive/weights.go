package additive

// WeightLanes is the elements of one row's weights in WeightRows16: 96
// bytes, three 32-byte groups of the dense kernel.
const WeightLanes = 48

// WeightRows16 adds v[r] times row r's weights w[48r:48r+48] into acc, for
// every row r of v, mod 2^16 (a weighted sum of rows, lane by lane: the
// checks of hidden probes' products, sharing/replicated). The dense
// kernel does four rows at a time where AVX2 runs.
func WeightRows16(acc *[WeightLanes]uint16, w, v []uint16) {
	if len(w) < WeightLanes*len(v) {
		panic("additive: fewer weights than rows")
	}
	if !weightRows16AVX2(acc, w, v) {
		weightRows16(acc, w, v)
	}
}

func weightRows16(acc *[WeightLanes]uint16, w, v []uint16) {
	for r, x := range v {
		if x == 0 {
			continue
		}
		row := w[r*WeightLanes : (r+1)*WeightLanes]
		for t := range acc {
			acc[t] += row[t] * x
		}
	}
}
