package main

import (
	"io"
	"net"
	"sync"
	"testing"

	"github.com/emersion/go-smtp"
)

// mailbox is an in-process SMTP server that keeps the messages it receives.
type mailbox struct {
	addr string
	mu   sync.Mutex
	got  []mailMessage
}

type mailMessage struct {
	From string
	To   []string
	Data string
}

func (m *mailbox) messages() []mailMessage {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]mailMessage(nil), m.got...)
}

type mailSession struct {
	box *mailbox
	msg mailMessage
}

func (s *mailSession) Reset()        { s.msg = mailMessage{} }
func (s *mailSession) Logout() error { return nil }
func (s *mailSession) Mail(from string, _ *smtp.MailOptions) error {
	s.msg.From = from
	return nil
}
func (s *mailSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.msg.To = append(s.msg.To, to)
	return nil
}
func (s *mailSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.msg.Data = string(b)
	s.box.mu.Lock()
	defer s.box.mu.Unlock()
	s.box.got = append(s.box.got, s.msg)
	return nil
}

// startMailbox serves SMTP on a free local port until the test ends.
func startMailbox(t *testing.T) *mailbox {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	box := &mailbox{addr: l.Addr().String()}
	srv := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return &mailSession{box: box}, nil }))
	srv.Domain = "localhost"
	go srv.Serve(l) //nolint:errcheck // ends at Close
	t.Cleanup(func() { srv.Close() })
	return box
}
