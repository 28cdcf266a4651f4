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

// WeightPairs8 is WeightRows16 for the 8-bit ring with rows in pairs:
// w[48p+t] holds round t's weights of rows 2p (low byte) and 2p+1 (high
// byte), every weight below 128, and acc[t] gains w's low byte times
// v[2p] plus its high byte times v[2p+1], for every pair p < len(v)/2
// (len(v) even), mod 2^16 (the low 8 bits are the sum mod 2^8). Half the
// weights' bytes of WeightRows16 and one instruction for two products
// (the dense kernel's VPMADDUBSW) where AVX2 runs.
func WeightPairs8(acc *[WeightLanes]uint16, w []uint16, v []byte) {
	pairs := len(v) / 2
	if len(v)%2 != 0 || len(w) < WeightLanes*pairs {
		panic("additive: weight pairs of an odd row count, or fewer weights than pairs")
	}
	if !weightPairs8AVX2Run(acc, w, v, pairs) {
		weightPairs8(acc, w, v, pairs)
	}
}

func weightPairs8(acc *[WeightLanes]uint16, w []uint16, v []byte, pairs int) {
	for p := range pairs {
		lo, hi := uint16(int8(v[2*p])), uint16(int8(v[2*p+1]))
		row := w[p*WeightLanes : (p+1)*WeightLanes]
		for t := range acc {
			acc[t] += row[t]&0xff*lo + row[t]>>8*hi
		}
	}
}
