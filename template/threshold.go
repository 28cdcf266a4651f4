package template

import "math"

// ScoreThreshold converts a cosine threshold tau into the real score
// threshold tau*sqrt(alpha*beta): a score s is accepted when s > it.
func ScoreThreshold(tau float64, alpha, beta int) float64 {
	return tau * math.Sqrt(float64(alpha)*float64(beta))
}

// MinAcceptScore is the smallest integer score accepted under the cosine
// threshold tau, i.e. the least s with s > tau*sqrt(alpha*beta).
func MinAcceptScore(tau float64, alpha, beta int) int {
	return int(math.Floor(ScoreThreshold(tau, alpha, beta))) + 1
}

// Cosine is the cosine estimate s/sqrt(alpha*beta) of an integer score.
func Cosine(score, alpha, beta int) float64 {
	return float64(score) / math.Sqrt(float64(alpha)*float64(beta))
}
