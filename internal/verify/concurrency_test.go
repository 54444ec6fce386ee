package verify

import (
	"sync"
	"testing"
)

// TestConcurrentVerify shares one Verifier (and its hash pools) between
// goroutines; run with -race.
func TestConcurrentVerify(t *testing.T) {
	v := mustNew(t, Config{Scheme: SchemeStripe, Secrets: []string{otherSecret, stripeSecret}})
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				body := `{"id":"evt_` + string(rune('a'+g)) + `"}`
				secret := []string{otherSecret, stripeSecret, githubSecret}[(g+i)%3]
				_, err := v.Verify(hdr("Stripe-Signature", stripeHeader(ts(0), body, secret)), []byte(body), testNow)
				if (err == nil) != (secret != githubSecret) {
					errs <- "wrong outcome for secret " + string(rune('0'+(g+i)%3))
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
