package testenv

import (
	"io"
	"net/http"
	"testing"
)

// The stand-in internet answers from a namespace of its own, reached from this host's.
func TestTheStandInInternetAnswers(t *testing.T) {
	addr, _ := Internet(t)
	res, err := http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if b, _ := io.ReadAll(res.Body); string(b) != InternetGreeting {
		t.Errorf("the stand-in answered %q", b)
	}
}
